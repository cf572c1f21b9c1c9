"""The JSON the service answers with, as pydantic models, so the OpenAPI document shows the real response schemas.
The ask result and the stream events are the pipeline's own models (graphs/results.py)."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from switchyard.graphs.results import AskResult, PendingAction


class Health(BaseModel):
    status: Literal["ok"]
    pipelines: list[str]


class PipelineInfo(BaseModel):
    name: str
    mode: Literal["fixed", "agent"]
    config: str
    mermaid: str
    approve: bool = False       # graph.router.approve: its runs pause for a human before each action


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


class ErrorDetail(BaseModel):
    detail: str
