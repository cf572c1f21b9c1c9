"""The JSON the service answers with, as pydantic models, so the OpenAPI document shows the real response schemas.
The ask result and the stream events are the pipeline's own models (graphs/results.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from switchyard.configs.schema import GraphMode
from switchyard.graphs.results import AskResult, PendingAction

MAX_K = 50  # passages one search may return


class AskRequest(BaseModel):
    question: str = Field(description="the question")
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


class Health(BaseModel):
    status: Literal["ok"]
    pipelines: list[str]


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
