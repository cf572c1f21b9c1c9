"""The JSON the service answers with, as pydantic models, so the OpenAPI document shows the real response schemas.
The ask result and the stream events are the pipeline's own models (graphs/results.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema

from switchyard.configs.schema import GraphMode
from switchyard.conversation import Message
from switchyard.graphs.results import AskResult, PendingAction

MAX_K = 50  # passages one search may return
MESSAGES_SCHEMA = {"anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}]}


class ErrorReply(BaseModel):
    """Every error but a request that does not validate (422, FastAPI's own) and the chat route's (OpenAI's)."""

    detail: str = Field(description="one line saying what went wrong")


class OpenAIErrorBody(BaseModel):
    message: str
    type: Literal["invalid_request_error", "server_error"]
    code: int


class OpenAIErrorReply(BaseModel):
    error: OpenAIErrorBody


ERROR_MEANINGS = {
    400: "malformed: a bad name, filter, label, question or value",
    401: "no valid credential (or the shared token while API keys exist)",
    403: "the key may read but not do this (needs --write or --admin)",
    404: "no such collection, document, pipeline, job or thread, or one the key may not read",
    409: "the index cannot take this now (e.g. another embedding model's collection)",
    410: "the paused run expired",
    413: "a question or an upload larger than the server takes",
    422: "an approval that does not fit the paused action",
    429: "over a limit (runs in flight, the key's rate); retry after Retry-After seconds",
    501: "the server lacks an optional part this needs",
    502: "the model server failed",
    503: "the server's API key file cannot be used",
    504: "the run took longer than the server's timeout",
}
AUTHENTICATED = (401, 429, 503)  # what the authentication in front of every non-public route may answer


def error_responses(*codes: int, model: type[BaseModel] = ErrorReply) -> dict[int | str, dict]:
    """The OpenAPI `responses` of the errors a route may answer, so the document lists every status it sends."""
    return {code: {"model": model, "description": ERROR_MEANINGS[code]} for code in sorted(codes)}


class AskRequest(BaseModel):
    question: str = Field(description="the question")
    # checked by switchyard.conversation.as_history, so that anything but a list of messages is one 400 line (a
    # `list` type here made a string or an object a 422 with a list of validation errors instead)
    messages: Annotated[Any, WithJsonSchema(MESSAGES_SCHEMA)] = Field(
        None,
        description="a conversation's earlier turns, oldest first: OpenAI-style {role: user|assistant, content} "
        "(system messages are ignored); the question is answered as their follow-up",
    )
    thread_id: str | None = Field(
        None,
        description="a conversation the server keeps: the turns of this thread (yours; a new id starts one) are the "
        "history, and this question and its answer are added to it. Not with `messages`",
    )
    pipeline: str | None = Field(None, description="a served pipeline's name (config file stem); default: first")
    collection: str | None = Field(None, description="collection to search; default: the pipeline's own")
    where: str | None = Field(None, description='metadata filter, e.g. "source~handbook and page=2"')


class SearchRequest(BaseModel):
    query: str = Field(description="what to look for: a question or keywords")
    pipeline: str | None = Field(
        None, description="a served pipeline's name (config file stem) whose retrieval runs; default: first"
    )
    collection: str | None = Field(None, description="collection to search; default: the pipeline's own")
    where: str | None = Field(None, description='metadata filter, e.g. "source~handbook and page=2"')
    k: int | None = Field(None, ge=1, le=MAX_K, description="passages to return; default: the pipeline's rerank.top_k")


class Conversation(BaseModel):
    thread_id: str
    messages: list[Message] = Field(description="the thread's turns, oldest first")


class StateHealth(BaseModel):
    backend: Literal["local", "postgresql"]
    ok: bool
    detail: str | None = None


class Health(BaseModel):
    status: Literal["ok", "unavailable"]  # unavailable: the shared state database cannot be reached (503)
    pipelines: list[str]
    state: StateHealth


class PipelineInfo(BaseModel):
    name: str
    mode: GraphMode
    config: str
    mermaid: str
    approve: bool = False  # graph.router.approve: its runs pause for a human before each action


class ThreadDone(AskResult):
    """A paused run (graph.router.approve) that went on to its answer: the ask result, with its thread."""

    status: Literal["done"] = "done"
    thread_id: str


class ThreadStatus(BaseModel):
    """Where a paused run stands; `pending` and `expires_at` while it waits."""

    thread_id: str
    status: Literal["paused", "running", "done", "expired", "failed"]
    pending: PendingAction | None = None
    expires_at: datetime | None = None


class CollectionInfo(BaseModel):
    name: str
    chunks: int


class DocumentInfo(BaseModel):
    doc_id: str
    title: str
    source: str
    chunks: int
    pages: int | None


class Deleted(BaseModel):
    deleted: str
    chunks: int


class UploadAccepted(BaseModel):
    job_id: str
    status_url: str
    files: list[str]


class FileProgress(BaseModel):
    name: str
    status: Literal["queued", "indexed", "unchanged", "error"]
    error: str | None
    added: int
    updated: int


class JobProgress(BaseModel):
    files_done: int
    files_total: int


class JobStatus(BaseModel):
    id: str
    collection: str
    state: Literal["queued", "running", "done", "failed"]
    files: list[FileProgress]
    created: float
    started: float | None
    finished: float | None
    error: str | None
    resumed: bool
    progress: JobProgress


class SearchPassage(BaseModel):
    """A ranked passage with every score it collected (per retriever, fused, reranked), as `search --json`."""

    chunk_id: str
    doc_id: str
    source: str
    title: str
    text: str
    page: int | None
    page_end: int | None
    start_char: int
    end_char: int
    score: float
    scores: dict[str, float]
    ranks: dict[str, int]


class SearchReply(BaseModel):
    """`POST /v1/search`: the passages `search --json` prints, best first, with the step timings and the config."""

    query: str
    collection: str
    results: list[SearchPassage]
    timings_ms: dict[str, float]
    config: dict


class ErrorDetail(BaseModel):
    detail: str
