"""answer: the answer from the kept passages, with `[n]` citations checked after generation.

Formats (`answer.format`):
- `short` (default): a short answer (entity, number, date, yes/no, short phrase) first, then the evidence: passage
  sentences that support it, each citing its passage. The short answer is shown only when it is grounded: it occurs
  in a kept passage (normalised, numbers and dates in their usual variants), or, for yes/no and "A or B" questions,
  it is yes/no or one of the options (an option must occur in a passage) and evidence sentences back it. Otherwise
  the evidence alone is shown, or the run abstains (`answer.ungrounded`); `grounding` in the result says which.
- `sentences`: 1-3 cited sentences, each checked against the passage it cites.
Methods: `llm` (the model answers from numbered passages: a JSON short answer and the passage it comes from, or
free sentences; it may say NOT FOUND, which becomes an abstention, except that a short answer's "no answer" gets
the `answer.ungrounded` fallback first when the corrective check judged the passages `correct`, or `ambiguous` with a
kept passage holding `answer.fallback_coverage` of the question's content words) and `extractive` (no
LLM: the span of the best sentences that has the type the question asks for, or the best sentences themselves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, create_model

from switchyard.configs.schema import AnswerConfig
from switchyard.llm.prompts import (
    ANSWER_SYSTEM,
    CLOSED_BOOK_SYSTEM,
    NOT_FOUND,
    SHORT_ANSWER_RULES,
    SHORT_ANSWER_SYSTEM,
    SPOTLIGHT_DATAMARK,
)
from switchyard.nodes.citations import Citation, cite_record, verify_citations
from switchyard.nodes.contextualize import gist, search_text
from switchyard.nodes.grade import passage_coverage
from switchyard.nodes.resources import Resources
from switchyard.nodes.short_answer import (
    QuestionShape,
    clean_answer,
    extractive_span,
    grounded_in,
    match_option,
    occurs_in,
    question_shape,
    split_list,
    sub_spans,
)
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.injection import unflagged
from switchyard.run_context import RunContext, TokenSink
from switchyard.text import split_sentences, strip_citations

DATAMARK = "^"  # Hines et al. 2024, "Defending Against Indirect Prompt Injection Attacks With Spotlighting"


def number_passages(passages: list[Passage], spotlight: str = "none", titles: bool = True, clip: int = 0) -> str:
    """The passages as the prompts show them: one line per passage, `[n] title: text` (whitespace collapsed; no
    title with `titles=False`; the text clipped to `clip` characters when > 0). With `spotlight: datamark` every
    space inside the passage text becomes `^` (datamarking), so the text stays on its line and reads as data."""
    lines = []
    for i, p in enumerate(passages, 1):
        text = " ".join(p.text.split())
        text = text[:clip] if clip else text
        if spotlight == "datamark":
            text = text.replace(" ", DATAMARK)
        lines.append(f"[{i}] {p.title}: {text}" if titles else f"[{i}] {text}")
    return "\n".join(lines)


def unmark(text: str) -> str:
    """A reply with the datamarks a model copied from the passages turned back into spaces."""
    return text.replace(DATAMARK, " ")


def _system(prompt: str, spotlight: str) -> str:
    return prompt + (SPOTLIGHT_DATAMARK if spotlight == "datamark" else "")


def _prompt(
    question: str, passages: list[Passage], spotlight: str = "none", history: Sequence[dict] = ()
) -> list[dict]:
    numbered = number_passages(passages, spotlight)
    return [
        {"role": "system", "content": _system(ANSWER_SYSTEM, spotlight)},
        *history,
        {"role": "user", "content": f"Passages:\n{numbered}\n\nQuestion: {question}"},
    ]


def earlier_turns(state: dict, keep: int) -> list[dict]:
    """The last `keep` messages of a conversation's earlier turns, as the answer prompt shows them: an earlier
    answer's citation marks are dropped (its passages are not this turn's), each message is clipped to its gist (what
    the condensing step shows too), and the model's prompt fitting shortens them further like any message when the
    prompt is still too long (llm/backend.py `fit_messages`)."""
    turns = (state.get("history") or [])[-keep:] if keep else []
    return [{"role": m["role"], "content": gist(strip_citations(m["content"]))} for m in turns]


def ranked_sentences(question: str, passages: list[Passage], embedder) -> list[tuple[int, str, float]]:
    """(passage index, sentence, cosine to the question) for every passage sentence of 4+ words, best first."""
    candidates = [
        (i, s)
        for i, p in enumerate(passages)
        for s in split_sentences(" ".join(p.text.split()))
        if len(s.split()) >= 4 and not s.startswith("#")
    ]
    if not candidates:
        return []
    scores = (embedder.run([s for _, s in candidates]) @ embedder.embed_query(question)).tolist()
    return sorted(((i, s, float(c)) for (i, s), c in zip(candidates, scores)), key=lambda t: -t[2])


def extractive_answer(question: str, passages: list[Passage], embedder, max_sentences: int) -> str:
    """Best sentences by cosine to the question, kept in passage order, each ending with its passage number."""
    best = ranked_sentences(question, passages, embedder)[:max_sentences]
    text = [" ".join(p.text.split()) for p in passages]
    picked = sorted(best, key=lambda t: (t[0], text[t[0]].find(t[1])))  # reading order
    return " ".join(f"{s.rstrip('.!?')} [{i + 1}]." for i, s, _ in picked)


class ShortReply(BaseModel):
    answer: str
    passage: int = 0


def reply_model(shape: QuestionShape) -> type[ShortReply]:
    """The JSON the model must write: yes/no questions may only answer yes or no, choice questions one of the
    options (the grammar enforces it); no field descriptions, which small models copy into their answers."""
    if shape.kind == "open":
        return ShortReply
    choices = ("yes", "no") if shape.kind == "yes_no" else tuple(shape.options)
    choice: Any = Literal[choices]  # a Literal of the options, made at run time
    return create_model("ShortChoice", __base__=ShortReply, answer=(choice, ...), passage=(int, 0))


def _short_prompt(
    question: str, passages: list[Passage], shape: QuestionShape, spotlight: str = "none", history: Sequence[dict] = ()
) -> list[dict]:
    rule = SHORT_ANSWER_RULES[shape.kind].format(options=" or ".join(shape.options))
    numbered = number_passages(passages, spotlight)
    return [
        {"role": "system", "content": _system(SHORT_ANSWER_SYSTEM.format(rule=rule), spotlight)},
        *history,
        {"role": "user", "content": f"Passages:\n{numbered}\n\nQuestion: {question}"},
    ]


def answer(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    """Every field of the answer is returned, so an agent's second answer never keeps a part of its first. When the
    run is streamed, the answer's tokens go out as `token` events (only this node's: rewrite, grading and router
    calls never reach the token stream)."""
    run = runtime.context
    sink = (
        (lambda text: runtime.stream_writer({"event": "token", "text": text}))
        if run is not None and run.stream_tokens
        else None
    )
    return {"short_answer": "", "evidence": "", "grounding": {}, **_answer(state, res, run, sink)}


def _answer(state: dict, res: Resources, run: RunContext | None, sink: TokenSink | None) -> dict:
    cfg = res.config.answer
    question = state["question"]
    if cfg.method == "closed_book":  # the no-retrieval baseline: nothing to cite
        text = res.llm.generate(
            [
                {"role": "system", "content": CLOSED_BOOK_SYSTEM},
                *earlier_turns(state, res.config.conversation.answer_turns),
                {"role": "user", "content": question},
            ],
            max_tokens=res.config.llm.max_tokens,
            on_token=sink,
            run=run,
        )
        return {"answer": text or cfg.abstain_message, "abstained": not text, "citations": [], "citation_check": {}}
    policy = res.config.retrieve  # the answer is grounded in passages that are not flagged, only
    passages = unflagged(state.get("graded", []), policy.injection_policy, policy.injection_threshold)
    passages = passages[: cfg.max_passages]
    if not passages:
        return abstention(cfg.abstain_message, "no relevant passages")
    asked = Asked(question, search_text(state), earlier_turns(state, res.config.conversation.answer_turns))
    if cfg.format == "short":
        return short_answer(asked, passages, res, state.get("verdict"), run, sink)
    return sentences_answer(asked, passages, res, run, sink)


@dataclass(frozen=True)
class Asked:
    """A question as the answer step reads it: as asked (the prompt's last line, its shape), the text passages are
    ranked and grounded against (a conversation's standalone question), and the earlier messages the prompt shows."""

    question: str
    search: str = ""
    history: Sequence[dict] = ()

    @classmethod
    def of(cls, question: str | Asked) -> Asked:
        return question if isinstance(question, Asked) else cls(question, question)


def sentences_answer(
    asked: str | Asked,
    passages: list[Passage],
    res: Resources,
    run: RunContext | None = None,
    sink: TokenSink | None = None,
) -> dict:
    """`answer.format: sentences`: 1-3 cited sentences, each checked against the passage it cites."""
    asked = Asked.of(asked)
    question = asked.search
    cfg = res.config.answer
    vectors = res.passage_vectors(passages)

    def extractive() -> tuple[str, list[Citation], dict]:
        text = extractive_answer(question, passages, res.embedder, cfg.max_sentences)
        return verify_citations(text, passages, res.embedder, cfg.support_threshold, passage_vectors=vectors)

    if cfg.method == "llm":
        text = res.llm.generate(
            _prompt(asked.question, passages, cfg.spotlight, asked.history),
            max_tokens=res.config.llm.max_tokens,
            on_token=sink,
            run=run,
        )
        text = unmark(text) if cfg.spotlight == "datamark" else text
        if NOT_FOUND.lower() in text.lower()[: len(NOT_FOUND) + 10] or not text.strip():
            return abstention(cfg.abstain_message, "the model found no answer in the passages")
        # a looping answer, or one no passage supports, is replaced by the passages' own best sentences
        reason = "the model's answer was repetitive" if is_degenerate(text) else ""
        if not reason:
            final, citations, check = verify_citations(
                text,
                passages,
                res.embedder,
                cfg.support_threshold,
                drop_unsupported=cfg.drop_unsupported,
                passage_vectors=vectors,
            )
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


Ranked = list[tuple[int, str, float]]


def short_answer(
    asked: str | Asked,
    passages: list[Passage],
    res: Resources,
    verdict: str | None = None,
    run: RunContext | None = None,
    sink: TokenSink | None = None,
) -> dict:
    """`answer.format: short`: propose a short answer (the model, or an extractive span), ground it, add evidence.
    `verdict` is the corrective check's (absent in an agent run that skipped it)."""
    cfg = res.config.answer
    asked = Asked.of(asked)
    question = asked.search
    shape = question_shape(asked.question)
    ranked = ranked_sentences(question, passages, res.embedder)
    hint = None
    if cfg.method == "llm":
        model = reply_model(shape)
        reply = res.llm.structured(
            _short_prompt(asked.question, passages, shape, cfg.spotlight, asked.history),
            model,
            model.model_construct(answer="", passage=0),
            max_tokens=cfg.short_max_tokens,
            run=run,
        )
        said = unmark(reply.value.answer) if cfg.spotlight == "datamark" else reply.value.answer
        proposed, hint, source = clean_answer(said), reply.value.passage - 1, "llm"
        if not proposed or proposed.upper().startswith(NOT_FOUND):
            # The small model says "no answer" to answerable questions (7% of the HotpotQA tuning questions, the
            # check having judged their passages correct; 8 of 160 PhantomWiki development questions, judged
            # ambiguous but with a kept passage holding most of the question's words): there the extractive fallback
            # is tried before abstaining.
            if not (cfg.ungrounded == "extractive" and _passages_answer(question, passages, verdict, cfg)):
                return abstention(
                    cfg.abstain_message,
                    "the model found no answer in the passages",
                    grounding={"status": "abstained", "shown": "abstention", "source": source, "proposed": proposed},
                )
            proposed = ""
    else:
        proposed, source = _extractive_proposal(question, shape, ranked, cfg.span_sentences), "extractive"
    found = ground(proposed, shape, passages, ranked, hint, cfg.max_sentences, question)
    grounding: dict[str, Any] = {"source": source, "proposed": proposed}
    if found is None and cfg.ungrounded == "extractive" and source == "llm":
        fallback = _extractive_proposal(question, shape, ranked, cfg.span_sentences)
        found = ground(fallback, shape, passages, ranked, None, cfg.max_sentences, question)
        if found is not None:
            grounding |= {
                "source": "extractive",
                "model_found_no_answer" if not proposed else "model_answer_ungrounded": True,
            }
    if found is None:
        grounding |= {
            "status": "ungrounded",
            "reason": "the model found no answer"
            if source == "llm" and not proposed
            else "not yes/no or one of the options"
            if shape.kind != "open" and proposed
            else "the short answer occurs in no kept passage",
        }
        if cfg.ungrounded == "abstain" or not ranked:  # (`extractive` found no grounded span either)
            return abstention(
                cfg.abstain_message,
                "the short answer is not grounded in the passages",
                grounding={**grounding, "shown": "abstention"},
            )
        result = compose("", [], ranked[: cfg.max_sentences], passages)
        return {**result, "grounding": {**grounding, "shown": "evidence"}}
    result = compose(found["short"], found["passages"], found["evidence"], passages)
    grounding |= {"status": "grounded", "shown": "short_answer", "how": found["how"]}
    if found["dropped"]:
        grounding["dropped"] = found["dropped"]
    if sink:  # the answer is known only once grounded: it streams as one piece
        sink(result["answer"])
    return {**result, "grounding": grounding}


def _passages_answer(question: str, passages: list[Passage], verdict: str | None, cfg: AnswerConfig) -> bool:
    """Whether the kept passages are trusted to hold the answer although the model found none."""
    if verdict == "correct":
        return True
    return verdict == "ambiguous" and any(passage_coverage(question, p) >= cfg.fallback_coverage for p in passages)


def _extractive_proposal(question: str, shape: QuestionShape, ranked: Ranked, span_sentences: int) -> str:
    if shape.kind == "open":
        return extractive_span(question, shape, [s for _, s, _ in ranked[:span_sentences]])
    if shape.kind == "choice":  # the option named in the best sentence that names exactly one
        for _, sentence, _ in ranked[:span_sentences]:
            named = [o for o in shape.options if occurs_in(o, sentence)]
            if len(named) == 1:
                return named[0]
    return ""  # yes/no: no LLM, no verdict; the evidence is shown alone


def ground(
    proposed: str,
    shape: QuestionShape,
    passages: list[Passage],
    ranked: Ranked,
    hint: int | None,
    max_sentences: int,
    question: str = "",
) -> dict | None:
    """{short, passages (indexes it occurs in), evidence (ranked entries), how, dropped} or None when ungrounded.
    An open answer (each item of a list) that occurs in no passage is replaced by its longest part that does."""
    if not proposed:
        return None
    if shape.kind != "open":
        option = match_option(proposed, shape)
        if option is None:
            return None
        if shape.kind == "yes_no":
            evidence = ranked[:max_sentences]
            return (
                {
                    "short": option,
                    "passages": [],
                    "evidence": evidence,
                    "how": "yes/no, with the evidence",
                    "dropped": [],
                }
                if evidence
                else None
            )
        j = grounded_in(option, passages, hint)
        if j is None:
            return None
        naming = [t for t in ranked if any(occurs_in(o, t[1]) for o in shape.options)]
        return {
            "short": option,
            "passages": [j],
            "evidence": (naming or ranked)[:max_sentences],
            "how": "one of the options, in a passage",
            "dropped": [],
        }
    kept, where, dropped = [], [], []
    how = "occurs in a cited passage"
    for item in split_list(proposed):
        j = grounded_in(item, passages, hint)
        if j is None:
            part = next((x for x in sub_spans(item, question) if grounded_in(x, passages, hint) is not None), None)
            if part is None:
                dropped.append(item)
                continue
            item, j, how = part, grounded_in(part, passages, hint), "a part of the answer occurs in a cited passage"
        kept.append(item)
        where.append(j)
    if not kept:
        return None
    evidence = []
    for item, j in zip(kept, where):
        mine = [t for t in ranked if t[0] == j]
        hit = next((t for t in mine if occurs_in(item, t[1])), mine[0] if mine else None)
        if hit and hit not in evidence:
            evidence.append(hit)
    for t in ranked:  # context for the answer: the sentences closest to the question
        if len(evidence) >= max(max_sentences, len(kept)):
            break
        if t not in evidence:
            evidence.append(t)
    return {"short": ", ".join(kept), "passages": where, "evidence": evidence, "how": how, "dropped": dropped}


def compose(short: str, short_passages: list[int], evidence: Ranked, passages: list[Passage]) -> dict:
    """The answer text (short answer with its citations, a blank line, the evidence sentences with theirs), the
    citations numbered 1..m in order of first use, and the citation check's counts."""
    order: list[int] = []

    def mark(j: int) -> str:
        if j not in order:
            order.append(j)
        return f"[{order.index(j) + 1}]"

    cited = " ".join(mark(j) for j in dict.fromkeys(short_passages))
    evidence_text = " ".join(f"{s.rstrip('.!?')} {mark(i)}." for i, s, _ in evidence)
    head = f"{short} {cited}".strip() if short else ""
    text = f"{head}\n\n{evidence_text}".strip()
    citations = [cite_record(n, passages[j]) for n, j in enumerate(order, start=1)]
    check = {
        "format": "short",
        "sentences": len(evidence),
        "kept": len(evidence),
        "corrected": 0,
        "dropped": 0,
        "unsupported": 0,
        "removed": 0,
    }
    return {
        "answer": text,
        "short_answer": short,
        "evidence": evidence_text,
        "abstained": False,
        "citations": citations,
        "citation_check": check,
    }


def is_degenerate(text: str, n: int = 3, max_repeats: int = 3) -> bool:
    """True when some word n-gram occurs more than `max_repeats` times: the model is looping."""
    words = text.lower().split()
    counts: dict[tuple, int] = {}
    for i in range(len(words) - n + 1):
        gram = tuple(words[i : i + n])
        counts[gram] = counts.get(gram, 0) + 1
        if counts[gram] > max_repeats:
            return True
    return False


def abstention(message: str, reason: str, check: dict | None = None, grounding: dict | None = None) -> dict:
    out = {
        "answer": message,
        "abstained": True,
        "citations": [],
        "citation_check": {**(check or {}), "abstain_reason": reason},
    }
    return {**out, "grounding": grounding} if grounding else out
