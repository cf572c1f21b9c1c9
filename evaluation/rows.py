"""One evaluated question as a typed row: what the runner writes to questions.jsonl (one JSON line each) and what
the reports read. Scores are recomputed from the stored line (`rescored`), so a metric fix applies to finished
evaluations without re-running the pipelines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from switchyard.evaluation.jsonl import read_results
from switchyard.evaluation.metrics import (
    NO_DOCUMENTS_TYPES,
    UNANSWERABLE_TYPE,
    answer_scores,
    attack_succeeded,
    citation_precision,
    gold_recall,
    no_documents_scores,
    turn_retrieval_scores,
    unanswerable_scores,
)

RESULTS = "questions.jsonl"  # a run folder's rows (and `questions.jsonl.xz`, packed: evaluation/jsonl.py)

ERROR_SCORES = {"exact_match": 0.0, "f1": 0.0, "contains": 0.0, "gold_recall": None, "citation_precision": None}


class EvalRow(BaseModel):
    """A (config, run, question) result. A failed question has `error` set, zero scores and none of the answer's
    fields; `faithfulness`/`judge_fallbacks` are filled in when a judge ran, the research's metrics when asked for."""

    model_config = ConfigDict(extra="forbid")

    config: str
    run: int
    id: str
    trace_id: str | None = None  # set only while tracing is on (package/tracing.py)
    question: str = ""
    answers: list[str] = []
    is_list: bool = False
    difficulty: str | int = "-"
    type: str = "-"
    gold_doc_ids: list[str] = []
    prediction: str = ""  # what the user reads first: the short answer when one is shown, else the answer
    answer: str | None = None
    evidence: str | None = None
    grounding: dict[str, Any] | None = None
    abstained: bool = False
    error: str | None = None
    latency_ms: float = 0.0
    llm_calls: int = 0
    cached_calls: int = 0  # of llm_calls, those answered from the reply cache: latency_ms is then not the model's
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_fallbacks: int = 0
    guards: dict[str, int] = {}
    retrieved_doc_ids: list[str] | None = None
    citations: list[dict[str, Any]] | None = None
    steps: list[dict[str, Any]] | None = None
    trace: list[dict[str, Any]] | None = None
    exact_match: float = 0.0
    f1: float = 0.0
    contains: float = 0.0
    gold_recall: float | None = None
    citation_precision: float | None = None
    faithfulness: float | None = None
    judge_fallbacks: int | None = None
    # the research's metrics (evaluation/research_metrics.py), filled in when `eval --metrics` asks for them
    answer_similarity: float | None = None
    answer_relevance: float | None = None
    context_relevance: float | None = None
    relevance_fallbacks: int | None = None
    attack: dict[str, Any] | None = None  # type `injection` only: the payload's kind and canaries
    attack_success: float | None = None  # type `injection` only: 1 when the run did what the payload asked
    # a conversation's turn only: its position, how many earlier messages it was asked after, the standalone
    # question retrieval read, and its retrieval against the turn's gold passages
    turn: int | None = None
    history_messages: int | None = None
    standalone: str | None = None
    recall_at_5: float | None = None
    ndcg_at_10: float | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        return self.config, self.run, self.id

    def to_json(self) -> dict:
        """The line's JSON: the fields this row was given (a failed question has no answer fields)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def scores(self) -> dict[str, float | None]:
        """Answer and grounding metrics from what the row stores."""
        if self.error:
            return dict(ERROR_SCORES)
        if self.type in NO_DOCUMENTS_TYPES:
            scores = no_documents_scores(self.prediction, self.answers, self.abstained, bool(self.retrieved_doc_ids))
        elif self.type == UNANSWERABLE_TYPE:
            scores = unanswerable_scores(self.abstained)
        else:
            scores = answer_scores("" if self.abstained else self.prediction, self.answers, self.is_list)
        out = {
            **scores,
            "gold_recall": gold_recall(self.retrieved_doc_ids or [], self.gold_doc_ids),
            "citation_precision": citation_precision([c["doc_id"] for c in self.citations or []], self.gold_doc_ids),
        }
        if self.attack is not None:  # an injection question (only then, so other rows keep their fields)
            out["attack_success"] = float(self.obeyed(self.attack.get("canary") or []))
        if self.turn is not None:  # a conversation's turn (only then, likewise)
            out.update(turn_retrieval_scores(self.retrieved_doc_ids or [], self.gold_doc_ids))
        return out

    def obeyed(self, canaries: list[str]) -> bool:
        """Whether this run did what a payload with these canaries asked (`attack_succeeded` over the answer the user
        read, or the prediction when the row stores no answer, and the agent's actions)."""
        answer = self.answer if self.answer is not None else self.prediction
        return attack_succeeded(answer, self.steps, canaries)

    def rescored(self) -> EvalRow:
        return self.model_copy(update=self.scores())


def read_rows(path: Path) -> list[EvalRow]:
    """Every complete row of a results file (a torn last line is ignored)."""
    return [EvalRow.model_validate(r) for r in read_results(path)]
