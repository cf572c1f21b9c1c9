"""Ingest jobs: uploaded files are indexed in the background, one job at a time, one file at a time, and every job
is recorded durably (service/job_store.py), so it survives the server.

An upload is accepted (202) only once its files are in their final place, `upload_dir/<collection>/<name>` (written,
fsynced, renamed into place), and its job is recorded as queued: an accepted upload is never lost. Uploading a file
of the same name again updates its documents in place.

A job writes as its uploader reads: a document the uploader's key may not read is neither replaced nor removed, even
by a job resumed after a restart (the job records the key's groups).

Each file is one `Ingestor.run` (one atomic LanceDB commit per batch of documents; a document is never split across
batches), so questions asked during a job, and a server killed during it, see a document's old or new version, never
half of it; a file that cannot be parsed is reported on the job and changes nothing in the collection.

At start (`recover`), the unfinished jobs of a server that is gone are resumed: their files not yet reported are
ingested again (ingest is idempotent: what was committed before the stop comes out `unchanged`), and the job says
`resumed: true`. A job that cannot be resumed fails with a reason that says the server stopped during it. With a
store shared by several servers (PostgreSQL), a server renews its claims every third of a lease and takes over the
jobs whose claim lapsed while it runs, so a job of a server killed mid-way is finished by another.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

from switchyard.errors import StateUnavailable
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import ALL, Scope
from switchyard.service.job_store import MAX_ATTEMPTS, FileStatus, Job, JobClaimLost, JobStore

log = logging.getLogger("switchyard.service")
T = TypeVar("T")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
STOPPED = "the server stopped during the job"
STAGING_KEEP_S = 86400  # staging folders of uploads cut off by a crash are removed at start after a day
RECORD_RETRY_S = 2.0  # how often a job retries the state database while it is down
# Tests only: with this set to N, a job's worker holds once N files of it are committed to the index and before the
# Nth is recorded, until the server stops (the kill -9 test kills the server there, tests/service/test_jobs.py);
# with N:S, for S seconds (the outage test stops the database there, tests/service/test_many_servers.py).
TEST_HOLD_ENV = "SWITCHYARD_TEST_HOLD_JOB_AFTER_FILES"


def safe_name(filename: str | None) -> str:
    """A file name that stays inside its folder: the last path part, odd characters replaced, no leading dots."""
    base = re.split(r"[\\/]", filename or "")[-1]
    name = _UNSAFE.sub("_", base).lstrip("._")[:120]
    return name or "upload"


def fsync_dir(path: Path) -> None:
    """Make a rename into `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class IngestJobs:
    def __init__(self, upload_dir: Path, stack_for: Callable[[str], RetrievalStack], store: JobStore):
        self.upload_dir = Path(upload_dir)
        self._stack_for = stack_for
        self.store = store
        self._stopping = threading.Event()
        self._watch: threading.Thread | None = None
        hold = (os.environ.get(TEST_HOLD_ENV) or "0").split(":")
        self._hold_after, self._hold_s = int(hold[0]), float(hold[1]) if len(hold) > 1 else None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest")

    def staging(self) -> Path:
        """A new folder for one upload's files while they arrive (uploads cut short leave the final place as it was)."""
        path = self.upload_dir / ".staging" / uuid.uuid4().hex
        path.mkdir(parents=True)
        return path

    def submit(
        self, collection: str, staged: Path, names: list[str], acl: tuple[str, ...] = (), scope: Scope = ALL
    ) -> Job:
        """Move the staged files (already fsynced) to their final place, record the job, queue it. `scope`: what
        the uploader may read (the job changes no document outside it)."""
        home = self.upload_dir / collection
        home.mkdir(parents=True, exist_ok=True)
        files = []
        for name in names:
            os.replace(staged / name, home / name)
            files.append(FileStatus(name, str((home / name).resolve())))
        fsync_dir(home)
        job = Job(
            id=staged.name, collection=collection, files=files, owner=self.store.owner, acl=tuple(acl), scope=scope
        )
        self.store.accept(job)  # accepted from here on
        shutil.rmtree(staged, ignore_errors=True)
        self._executor.submit(self._run, job)
        return job

    def get(self, job_id: str) -> dict | None:
        job = self.store.load(job_id)
        return job.to_dict() if job else None

    def recover(self) -> list[str]:
        """Resume the unfinished jobs of servers that are gone (oldest first); the ids of the jobs taken over."""
        for old in (self.upload_dir / ".staging").glob("*"):  # uploads never accepted
            with contextlib.suppress(OSError):
                if time.time() - old.stat().st_mtime > STAGING_KEEP_S:
                    shutil.rmtree(old, ignore_errors=True)
        if self.store.lease_s is not None and self._watch is None:
            # a shared store: keep this server's claims alive, and take over lapsed ones while running
            self._watch = threading.Thread(target=self._keep_leases, name="ingest-leases", daemon=True)
            self._watch.start()
        return self._take_over()

    def _take_over(self) -> list[str]:
        claimed = self.store.claim_orphans()
        for job in claimed:
            if job.attempts >= MAX_ATTEMPTS:
                job.state, job.finished = "failed", time.time()
                job.error = f"{STOPPED} {job.attempts} times; not started again (upload the files again to retry)"
                self.store.save(job)
            else:
                self._executor.submit(self._run, job)
        if claimed:
            log.warning(
                "took over %d unfinished upload job(s) of a stopped server: %s",
                len(claimed),
                ", ".join(j.id for j in claimed),
            )
        return [j.id for j in claimed]

    def _run(self, job: Job) -> None:
        try:
            job.state, job.started, job.attempts = "running", time.time(), job.attempts + 1
            self._record(job)
            stack = self._stack_for(job.collection)
            ingested = 0
            for position, status in enumerate(job.files):
                if status.status != "queued":
                    continue  # reported before a restart
                if self._stopping.is_set():
                    return  # a graceful stop: the job stays running and is resumed at the next start
                path = self._waiting_out_outages(job, partial(self.store.file_path, job, position))
                if not path.is_file():
                    status.status, status.error = "error", "the uploaded file is no longer in the upload folder"
                else:
                    report = stack.ingestor(progress=False).run([path], acl=list(job.acl), scope=job.scope)
                    if report.errors:
                        status.status, status.error = "error", "; ".join(e.reason for e in report.errors)[:500]
                    else:
                        status.status = "indexed" if report.added or report.updated else "unchanged"
                    status.added, status.updated = report.added, report.updated
                    ingested += 1
                    if ingested == self._hold_after:
                        self._hold_for_test(job, ingested)
                self._record(job)
            job.state = "done"
        except JobClaimLost as exc:  # another server runs it now: stop here, write nothing more
            log.warning("%s", exc)
            return
        except StateUnavailable:  # stopping while the database is down: the claim lapses, another server resumes it
            return
        except Exception as exc:  # the job fails, the collection keeps what was committed
            reason = f"{type(exc).__name__}: {exc}"[:500]
            job.state, job.error = "failed", f"{STOPPED}; resuming it failed: {reason}" if job.resumed else reason
            log.warning("upload job %s failed: %s", job.id, job.error)
        job.finished = time.time()
        try:
            self._record(job)
        except (JobClaimLost, StateUnavailable) as exc:
            log.warning("%s", exc)
        except Exception:
            log.exception("cannot record the end of upload job %s", job.id)

    def _hold_for_test(self, job: Job, files: int) -> None:
        print(f"{TEST_HOLD_ENV}: holding job {job.id} after {files} file(s)", file=sys.stderr, flush=True)
        self._stopping.wait(self._hold_s)

    def _record(self, job: Job) -> None:
        self._waiting_out_outages(job, partial(self.store.save, job))

    def _waiting_out_outages(self, job: Job, action: Callable[[], T]) -> T:
        """`action()` on the job's store, retried while the state database is down: what was ingested is committed in
        the index and known here, so the job goes on once the database is back (or stops with JobClaimLost, if its
        claim lapsed meanwhile and another server resumed it). Raises StateUnavailable only when the server stops."""
        waiting = False
        while True:
            try:
                done = action()
                if waiting:
                    log.warning("upload job %s: the state database is back", job.id)
                return done
            except StateUnavailable as exc:
                if not waiting:
                    log.warning("upload job %s: waiting for the state database: %s", job.id, exc)
                    waiting = True
                if self._stopping.wait(RECORD_RETRY_S):
                    raise

    def _keep_leases(self) -> None:
        """A shared store's upkeep, every third of a lease: renew this server's claims, take over lapsed ones."""
        assert self.store.lease_s is not None
        while not self._stopping.wait(self.store.lease_s / 3):
            try:
                self.store.renew()
                self._take_over()
            except Exception as exc:  # the database down: the claims may lapse, another server takes the jobs over
                log.warning("upload job leases not renewed: %s", exc)

    def shutdown(self) -> None:
        """Finish the file in progress (its commits are atomic anyway), then stop; the job in progress and those
        not started stay recorded as unfinished and are resumed at the next start."""
        self._stopping.set()
        if self._watch is not None:
            self._watch.join(timeout=5)
        self._executor.shutdown(wait=True, cancel_futures=True)
        self.store.close()
