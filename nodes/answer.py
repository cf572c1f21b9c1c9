"""answer: write the answer from the kept passages, with `[n]` citations checked after generation.

Methods: `llm` (the model answers from numbered passages and cites them; it may say NOT FOUND, which becomes an
abstention) and `extractive` (no LLM: the passage sentences closest to the question, each citing its passage).
"""
from __future__ import annotations

from nodes.citations import split_sentences, verify_citations
from nodes.prompts import ANSWER_SYSTEM, CLOSED_BOOK_SYSTEM, NOT_FOUND
from nodes.resources import Resources
from nodes.run_context import answer_token_sink


def _prompt(question: str, passages: list[dict]) -> list[dict]:
    numbered = "\n".join(f"[{i}] {p['title']}: {' '.join(p['text'].split())}" for i, p in enumerate(passages, 1))
    return [{"role": "system", "content": ANSWER_SYSTEM},
            {"role": "user", "content": f"Passages:\n{numbered}\n\nQuestion: {question}"}]


def extractive_answer(question: str, passages: list[dict], embedder, max_sentences: int) -> str:
    """Best sentences by cosine to the question, kept in passage order, each ending with its passage number."""
    candidates = [(i, s) for i, p in enumerate(passages) for s in split_sentences(" ".join(p["text"].split()))
                  if len(s.split()) >= 4 and not s.startswith("#")]
    if not candidates:
        return ""
    scores = (embedder.run([s for _, s in candidates]) @ embedder.embed_query(question)).tolist()
    best = sorted(range(len(candidates)), key=lambda k: -scores[k])[:max_sentences]
    picked = sorted(best, key=lambda k: (candidates[k][0], k))
    parts = []
    for k in picked:
        i, sentence = candidates[k]
        body = sentence.rstrip(".!?")
        parts.append(f"{body} [{i + 1}].")
    return " ".join(parts)


def answer(state: dict, res: Resources) -> dict:
    cfg = res.config.answer
    question = state["question"]
    if cfg.method == "closed_book":  # the no-retrieval baseline: nothing to cite
        text = res.llm.generate([{"role": "system", "content": CLOSED_BOOK_SYSTEM}, {"role": "user", "content": question}],
                                max_tokens=res.config.llm.max_tokens, on_token=answer_token_sink())
        return {"answer": text or cfg.abstain_message, "abstained": not text, "citations": [], "citation_check": {}}
    passages = state.get("graded", [])[: cfg.max_passages]
    if not passages:
        return abstention(cfg.abstain_message, "no relevant passages")
    vectors = res.passage_vectors(passages)

    def extractive() -> tuple[str, list[dict], dict]:
        text = extractive_answer(question, passages, res.embedder, cfg.max_sentences)
        return verify_citations(text, passages, res.embedder, cfg.support_threshold, passage_vectors=vectors)

    if cfg.method == "llm":
        text = res.llm.generate(_prompt(question, passages), max_tokens=res.config.llm.max_tokens,
                                on_token=answer_token_sink())
        if NOT_FOUND.lower() in text.lower()[: len(NOT_FOUND) + 10] or not text.strip():
            return abstention(cfg.abstain_message, "the model found no answer in the passages")
        # a looping answer, or one no passage supports, is replaced by the passages' own best sentences
        reason = "the model's answer was repetitive" if is_degenerate(text) else ""
        if not reason:
            final, citations, check = verify_citations(text, passages, res.embedder, cfg.support_threshold,
                                                       drop_unsupported=cfg.drop_unsupported,
                                                       passage_vectors=vectors)
            if not citations:
                reason = "no sentence of the model's answer was supported by the passages"
        if reason:
            final, citations, check = extractive()
            check["fallback"] = f"extractive ({reason})"
    else:
        final, citations, check = extractive()
    if not citations:  # nothing in the answer is supported by any passage: do not present it as grounded
        return abstention(cfg.abstain_message, "no answer sentence is supported by the passages", check)
    return {"answer": final, "abstained": False, "citations": citations, "citation_check": check}


def is_degenerate(text: str, n: int = 3, max_repeats: int = 3) -> bool:
    """True when some word n-gram occurs more than `max_repeats` times: the model is looping."""
    words = text.lower().split()
    counts: dict[tuple, int] = {}
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        counts[gram] = counts.get(gram, 0) + 1
        if counts[gram] > max_repeats:
            return True
    return False


def abstention(message: str, reason: str, check: dict | None = None) -> dict:
    return {"answer": message, "abstained": True, "citations": [],
            "citation_check": {**(check or {}), "abstain_reason": reason}}
