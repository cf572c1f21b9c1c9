"""Ingest jobs: uploaded files are indexed in the background, one job at a time, one file at a time.

Each file is one `Ingestor.run` (one atomic LanceDB commit per batch of its documents), so questions asked during a
job see a document's old or new version, never half of it, and a file that cannot be parsed is reported on the job
and changes nothing in the collection. Uploaded files are kept under `upload_dir/<collection>/<name>`, so uploading
a file of the same name again updates its documents in place.
"""
from __future__ import annotations

import os
import re
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from retrievers.pipeline import RetrievalStack

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(filename: str | None) -> str:
    """A file name that stays inside its folder: the last path part, odd characters replaced, no leading dots."""
    base = re.split(r"[\\/]", filename or "")[-1]
    name = _UNSAFE.sub("_", base).lstrip("._")[:120]
    return name or "upload"


@dataclass
class FileStatus:
    name: str
    status: str = "queued"          # queued | indexed | unchanged | error
    error: str | None = None
    added: int = 0
    updated: int = 0


@dataclass
class Job:
    id: str
    collection: str
    state: str = "queued"           # queued | running | done | failed
    files: list[FileStatus] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    finished: float | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        done = sum(f.status != "queued" for f in self.files)
        return {**asdict(self), "progress": {"files_done": done, "files_total": len(self.files)}}


class IngestJobs:
    def __init__(self, upload_dir: Path, stack_for: Callable[[str], RetrievalStack]):
        self.upload_dir = Path(upload_dir)
        self._stack_for = stack_for
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest")

    def staging(self) -> Path:
        path = self.upload_dir / ".staging" / uuid.uuid4().hex
        path.mkdir(parents=True)
        return path

    def submit(self, collection: str, staged: Path, names: list[str]) -> Job:
        job = Job(id=staged.name, collection=collection, files=[FileStatus(n) for n in names])
        with self._lock:
            self._jobs[job.id] = job
        self._executor.submit(self._run, job, staged)
        return job

    def get(self, job_id: str) -> dict | None:
        with self._lock:
            job = self._jobs.get(job_id)
            return job.to_dict() if job else None

    def _run(self, job: Job, staged: Path) -> None:
        job.state = "running"
        try:
            stack = self._stack_for(job.collection)
            home = self.upload_dir / job.collection
            home.mkdir(parents=True, exist_ok=True)
            for status in job.files:
                target = home / status.name
                os.replace(staged / status.name, target)
                report = stack.ingestor(progress=False).run([target])
                if report.errors:
                    status.status, status.error = "error", "; ".join(e.reason for e in report.errors)[:500]
                else:
                    status.status = "indexed" if report.added or report.updated else "unchanged"
                status.added, status.updated = report.added, report.updated
            job.state = "done"
        except Exception as exc:  # the job fails, the collection keeps what was committed
            job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            job.finished = time.time()
            shutil.rmtree(staged, ignore_errors=True)

    def shutdown(self) -> None:
        """Finish the job in progress (its commits are atomic anyway); jobs not started are dropped."""
        self._executor.shutdown(wait=True, cancel_futures=True)
