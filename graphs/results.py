"""Typed results of a run: what `Pipeline.ask` returns (`AskResult`) and what `Pipeline.stream` yields (`StreamEvent`).

The JSON of `switchyard ask --json`, of the HTTP service and of its event stream is derived from these models
(`model_dump(mode="json")`), and the OpenAPI document shows them as the response schemas. Fields are declared in the
order the JSON has always had. Open-ended records (the grounding decision, the citation check's counts, a trace
entry's input/output summaries, an agent step) stay dicts of JSON values: their keys depend on the path a run took.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from switchyard.nodes.citations import Citation

Verdict = Literal["correct", "ambiguous", "incorrect"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict:
        """The JSON object users see (CLI, HTTP, stream)."""
        return self.model_dump(mode="json")


class TraceEntry(Record):
    """One node call: its duration, LLM use, and summaries of what it read and wrote."""

    node: str
    ms: float
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0
    parse_fallbacks: int = 0
    # calls answered from the LLM reply cache (their llm_ms is a file read); shown only when there are some
    cached_calls: int = Field(0, exclude_if=lambda v: v == 0)
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)


class Usage(Record):
    """The run's totals over every node."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0
    total_ms: float = 0.0
    cached_calls: int = 0  # of llm_calls, those answered from the LLM reply cache: total_ms is not the model's time


class Failures(Record):
    parse_fallbacks: int = 0  # structured replies still invalid after repair
    guards: dict[str, int] = Field(default_factory=dict)  # agent guard activations by guard


class ConfigInfo(Record):
    hash: str
    resolved: dict[str, Any]


class AskResult(Record):
    """One answered (or abstained) question: the answer as shown, its grounding and citations, what the run
    retrieved, its per-node trace and agent steps, its usage and the config it ran with."""

    question: str
    run_id: str
    # a conversation's turn only (absent from the JSON of a question alone): the standalone question retrieval read
    # (nodes/contextualize.py), and the thread that keeps the turns (Pipeline.ask(thread_id=...))
    standalone: str | None = Field(None, exclude_if=lambda v: v is None)
    thread_id: str | None = Field(None, exclude_if=lambda v: v is None)
    # only while tracing is on (package/tracing.py): absent from the JSON otherwise, which stays as it always was
    trace_id: str | None = Field(None, exclude_if=lambda v: v is None)
    answer: str = ""
    short_answer: str = ""
    evidence: str = ""
    grounding: dict[str, Any] = Field(default_factory=dict)
    abstained: bool = False
    citations: list[Citation] = Field(default_factory=list)
    verdict: Verdict | None = None
    queries: list[str] = Field(default_factory=list)
    retrieved_doc_ids: list[str] = Field(default_factory=list)
    citation_check: dict[str, Any] = Field(default_factory=dict)
    trace: list[TraceEntry] = Field(default_factory=list)
    steps: list[dict[str, Any]] = Field(default_factory=list)
    failures: Failures = Field(default_factory=Failures)
    usage: Usage = Field(default_factory=Usage)
    config: ConfigInfo


class PendingAction(Record):
    """graph.router.approve: the action a paused run waits to run, as the router's guards left it."""

    step: int
    action: str
    args: dict[str, Any] = Field(default_factory=dict)
    thought: str = ""
    guard: str | None = None


class Paused(Record):
    """A run paused for a human's answer (graph.router.approve); `Pipeline.resume(thread_id, ...)` goes on."""

    status: Literal["paused"] = "paused"
    thread_id: str
    question: str
    pending: PendingAction
    expires_at: datetime  # unanswered past this, the pause expires


# -- stream events ---------------------------------------------------------------------------------------------
class RunStart(Record):
    event: Literal["run_start"] = "run_start"
    run_id: str
    config_hash: str


class NodeStart(Record):
    event: Literal["node_start"] = "node_start"
    node: str


class NodeEnd(Record):
    event: Literal["node_end"] = "node_end"
    node: str
    ms: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    summary: dict[str, Any]


class PassageRef(Record):
    doc_id: str
    title: str
    source: str
    page: int | None
    score: float | None


class Passages(Record):
    """The passages a node kept (after retrieve, rerank and grade)."""

    event: Literal["passages"] = "passages"
    node: str
    passages: list[PassageRef]


class Decision(Record):
    """An agent router step: the action chosen, its arguments, the guard that overrode it (if any)."""

    event: Literal["decision"] = "decision"
    step: int | None
    action: str | None
    args: dict[str, Any] | None
    guard: str | None
    thought: str | None


class Token(Record):
    """Provisional answer text (citations are verified after generation; the `answer` event is authoritative)."""

    event: Literal["token"] = "token"
    text: str


class Answer(Record):
    event: Literal["answer"] = "answer"
    result: AskResult


class ErrorEvent(Record):
    event: Literal["error"] = "error"
    message: str


StreamEvent = Annotated[
    RunStart | NodeStart | NodeEnd | Passages | Decision | Token | Answer | ErrorEvent, Field(discriminator="event")
]
STREAM_EVENT = TypeAdapter(StreamEvent)
