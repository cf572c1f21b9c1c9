"""grade: the corrective check (CRAG-style). Per-passage relevance and a verdict: correct / ambiguous / incorrect.

Methods: `score` (no LLM: the cosine between the question and each passage under the embedding model, and the
share of the question's content words a passage holds, against thresholds tuned on HotpotQA and PhantomWiki, see
bench/calibration/) and `llm` (a structured yes/no per passage).
`correct` keeps every passage, `ambiguous` keeps only the relevant ones (at least the best), `incorrect` keeps none
and sends the graph back to `rewrite` with feedback, at most `grade.max_retries` times.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel

from switchyard.llm.client import judge_passages
from switchyard.llm.prompts import GRADE_RELEVANCE
from switchyard.nodes.contextualize import search_text
from switchyard.nodes.resources import Resources
from switchyard.retrievers.documents import Passage
from switchyard.run_context import RunContext
from switchyard.text import content_words

GradeRoute = Literal["relevant", "retry", "exhausted"]
GRADE_ROUTES: dict[str, str] = {"relevant": "answer", "retry": "rewrite", "exhausted": "abstain"}


def route_after_grade(state: dict, max_retries: int) -> GradeRoute:
    """The fixed pipeline's rule after grading (the agent's fallback uses it too): correct/ambiguous with passages
    -> answer; incorrect -> rewrite while retries are left, else abstain."""
    if state.get("verdict") in ("correct", "ambiguous") and state.get("graded"):
        return "relevant"
    if state.get("attempts", 0) <= max_retries:
        return "retry"
    return "exhausted"


class PassageGrade(BaseModel):
    relevant: bool


# Auxiliaries that questions use and the stop-word list (scikit-learn's, shared with BM25) lacks.
QUESTION_AUXILIARIES = frozenset({"does", "did"})
IRREGULAR_PLURALS = {"children": "child", "people": "person", "men": "man", "women": "woman", "wives": "wife"}


def singular(word: str) -> str:
    """A plural folded onto its singular, by spelling alone: a question asks for "daughters" or "great-uncles" and
    the passage says "The daughter of ..."; words in -ss / -us / -is are left as they are."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def coverage_words(text: str) -> set[str]:
    return {singular(w) for w in content_words(text) if w not in QUESTION_AUXILIARIES}


def word_coverage(question: str, passage_text: str) -> float:
    """Share of the question's content words (plurals folded) that occur in the passage (0 when it has none)."""
    asked = coverage_words(question)
    return len(asked & coverage_words(passage_text)) / len(asked) if asked else 0.0


def passage_coverage(question: str, passage: Passage) -> float:
    """`word_coverage` of what a passage shows: its title and its text."""
    return word_coverage(question, f"{passage.title}. {passage.text}")


def _cosines(res: Resources, question: str, passages: list[Passage]) -> list[float]:
    return (res.passage_vectors(passages) @ res.embedder.embed_query(question)).tolist()


def grade(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    cfg = res.config.grade
    passages: list[Passage] = state.get("reranked", [])
    question = search_text(state)
    attempts = state.get("attempts", 0) + 1
    if not passages:
        return {
            "graded": [],
            "verdict": "incorrect",
            "attempts": attempts,
            "feedback": f"no passages matched {state.get('query', question)!r}",
        }
    cosines = _cosines(res, question, passages)
    passages = [replace(p, scores={**p.scores, "grade_cosine": float(c)}) for p, c in zip(passages, cosines)]
    if cfg.method == "llm":
        grades = judge_passages(
            res.llm,
            GRADE_RELEVANCE,
            question,
            [p.text for p in passages],
            PassageGrade,
            PassageGrade(relevant=True),
            12,
            run=runtime.context,
        )
        flags = [g.relevant for g in grades]
        share = sum(flags) / len(flags)
        verdict = "correct" if share >= 0.5 else "ambiguous" if share > 0 else "incorrect"
    else:
        t = cfg.thresholds
        covered = [passage_coverage(question, p) >= t.coverage for p in passages]
        flags = [c >= t.relevant or cov for c, cov in zip(cosines, covered)]
        best = max(cosines)
        verdict = (
            "correct" if best >= t.correct else "incorrect" if best < t.incorrect and not any(covered) else "ambiguous"
        )
        if verdict != "incorrect" and not any(flags):
            flags = [c == best for c in cosines]
    if verdict == "correct":
        kept = passages
    elif verdict == "ambiguous":
        kept = [p for p, keep in zip(passages, flags) if keep]
    else:
        kept = []
    feedback = ""
    if verdict == "incorrect":
        titles = ", ".join(sorted({p.title for p in passages})[:3])
        feedback = f"queries {state.get('queries', [question])} only found unrelated passages ({titles})"
    return {"graded": kept, "verdict": verdict, "attempts": attempts, "feedback": feedback}
