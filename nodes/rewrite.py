"""rewrite: turn the question (and, on a retry, what the last round learnt) into retrieval queries.

Methods: `llm` (the model writes one or more search queries), `prf` (pseudo-relevance feedback: frequent
distinctive terms of the top passages are added to the question, no LLM), `none` (the question as is).
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache

from pydantic import BaseModel, Field

from nodes.resources import Resources
from retrievers.bm25 import Tokenizer, stop_words


class RewrittenQueries(BaseModel):
    queries: list[str] = Field(min_length=1, max_length=5)


_PROMPT = ("Rewrite the question into {n} short search engine quer{ies} that would find the passages answering "
           "it. Keep names, numbers and key terms. Reply as JSON: {{\"queries\": [...]}}")


def _dedupe(queries: list[str]) -> list[str]:
    seen, out = set(), []
    for q in queries:
        q = " ".join(q.split())
        if q and q.lower() not in seen:
            seen.add(q.lower())
            out.append(q)
    return out


def _keywords(text: str) -> str:
    stop = stop_words()
    words = [w for w in text.replace("?", " ").split() if w.lower().strip(".,;:!") not in stop]
    return " ".join(words) or text


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    return Tokenizer(stem=False, remove_stop_words=True)


def prf_expand(question: str, passages_text: list[str], n_terms: int) -> str:
    """Add the `n_terms` most frequent non-stop-word terms of the feedback passages that the question lacks."""
    tok = _tokenizer()
    have = set(tok(question))
    counts: Counter[str] = Counter()
    for text in passages_text:
        counts.update({t for t in tok(text) if len(t) > 2 and not t.isdigit()})  # document frequency
    extra = [t for t, _ in counts.most_common() if t not in have][:n_terms]
    return f"{question} {' '.join(extra)}".strip()


def rewrite(state: dict, res: Resources) -> dict:
    cfg = res.config.rewrite
    question = state["question"]
    attempts = state.get("attempts", 0)
    if cfg.method == "none":
        queries = [question] if attempts == 0 else [_keywords(question)]
    elif cfg.method == "prf":
        if attempts == 0:
            top = res.stack.retriever.run(question, top_k=cfg.prf_passages)
            queries = [prf_expand(question, [p.text for p in top], cfg.prf_terms)]
        else:  # the expanded query failed: fall back to the bare keywords
            queries = [_keywords(question)]
    else:
        n = cfg.num_queries
        prompt = _PROMPT.format(n=n, ies="y" if n == 1 else "ies")
        if attempts and state.get("feedback"):
            prompt += f"\nEarlier queries found nothing useful: {state['feedback']}. Try different words."
        result = res.llm.structured(
            [{"role": "system", "content": prompt}, {"role": "user", "content": question}],
            RewrittenQueries, fallback=RewrittenQueries(queries=[question]), max_tokens=96)
        generated = list(result.value.queries)[:n]
        # the first round also searches the question itself: a weak model's rewrite must not lose it
        queries = _dedupe(([question] if attempts == 0 else []) + generated) or [question]
    queries = _dedupe(queries)
    return {"queries": queries, "query": queries[0], "query_history": queries}
