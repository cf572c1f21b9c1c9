"""Durable upload jobs: the SQLite job store, and a real server killed with SIGKILL in the middle of a job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from switchyard.errors import StoreError
from switchyard.run_context import ALL
from switchyard.service.job_store import JOB_STORE_NAME, MAX_ATTEMPTS, FileStatus, Job, SqliteJobStore, job_store_path
from switchyard.service.jobs import IngestJobs
from tests.service.conftest import wait_for_job
from tests.together import run_together


def _job(collection: str = "c", files: int = 2) -> Job:
    return Job(
        id=uuid.uuid4().hex,
        collection=collection,
        files=[FileStatus(f"f{i}.txt", f"/up/{collection}/f{i}.txt") for i in range(files)],
    )


def _in_other_process(code: str, *args: str) -> None:
    """Run a snippet in a fresh interpreter (a store owned by a process that then goes away)."""
    subprocess.run([sys.executable, "-c", code, *args], check=True, timeout=60, cwd=Path(__file__).resolve().parents[2])


class TestJobStore:
    def test_where_it_lives(self, tmp_path):
        assert job_store_path(str(tmp_path / "index"), tmp_path / "up") == tmp_path / "index" / JOB_STORE_NAME
        assert job_store_path(f"file://{tmp_path}/index", tmp_path / "up") == tmp_path / "index" / JOB_STORE_NAME
        assert job_store_path("s3://bucket/index", tmp_path / "up") == tmp_path / "up" / JOB_STORE_NAME

    def test_a_store_that_cannot_be_opened_is_a_store_error(self, tmp_path):
        (tmp_path / "index").write_text("a file where the index folder should be")
        with pytest.raises(StoreError, match="cannot record upload jobs in"):
            SqliteJobStore(tmp_path / "index" / JOB_STORE_NAME)

    def test_record_transitions_and_reload_in_a_new_instance(self, tmp_path):
        path = tmp_path / "index" / JOB_STORE_NAME
        store = SqliteJobStore(path)
        job = _job(files=3)
        job.owner, job.scope = store.owner, ("hr",)
        store.save(job)
        assert store.load(job.id).state == "queued" and store.load("nope") is None
        job.state, job.started, job.attempts = "running", time.time(), 1
        store.save(job)
        job.files[0].status, job.files[0].added = "indexed", 1
        job.files[1].status, job.files[1].error = "error", "not a PDF"
        store.save(job)
        job.files[2].status = "unchanged"
        job.state, job.finished = "done", time.time()
        store.save(job)
        store.close()

        again = SqliteJobStore(path)  # a new process's view
        loaded = again.load(job.id)
        assert loaded == job
        view = loaded.to_dict()
        assert view["state"] == "done" and view["resumed"] is False
        assert view["progress"] == {"files_done": 3, "files_total": 3}
        assert [f["status"] for f in view["files"]] == ["indexed", "error", "unchanged"]
        assert "path" not in view["files"][0] and "owner" not in view  # server details stay inside
        assert again.claim_orphans() == []  # finished jobs are not resumed
        again.close()

    def test_unfinished_jobs_of_a_dead_process_are_claimed_once_those_of_a_live_one_never(self, tmp_path):
        path = tmp_path / JOB_STORE_NAME
        # a process records a running job, then exits without closing its store (as after kill -9)
        _in_other_process(
            "import sys; from switchyard.service.job_store import *; s = SqliteJobStore(sys.argv[1]); "
            "j = Job(id='deadbeef', collection='c', state='running', attempts=1, owner=s.owner, "
            "files=[FileStatus('a.txt', '/up/a.txt', 'indexed', None, 1, 0), FileStatus('b.txt', '/up/b.txt')]); "
            "s.save(j); import os; os._exit(0)",
            str(path),
        )
        live = SqliteJobStore(path)  # another server, alive, with a job of its own
        mine = _job()
        mine.state, mine.owner = "running", live.owner
        live.save(mine)

        first, second = SqliteJobStore(path), SqliteJobStore(path)
        claimed = first.claim_orphans()
        assert [j.id for j in claimed] == ["deadbeef"]
        job = claimed[0]
        assert job.owner == first.owner and job.state == "queued" and job.attempts == 1
        assert [f.status for f in job.files] == ["indexed", "queued"]  # what was reported is kept
        assert second.claim_orphans() == []  # the dead one's job is first's now, and first is alive
        first.close()  # a store that closes gives its unfinished jobs up
        assert [j.id for j in second.claim_orphans()] == ["deadbeef"]
        assert live.load(mine.id).owner == live.owner
        # the lock file of a process gone with no job left is removed once it is an hour old
        _in_other_process(
            "import sys, os; from switchyard.service.job_store import *; s = SqliteJobStore(sys.argv[1]); "
            "print(s.owner); os._exit(0)",
            str(path),
        )
        owners = path.with_name(path.name + ".owners")
        stale = [p for p in owners.iterdir() if p.stem not in (live.owner, second.owner)]
        assert len(stale) == 1
        os.utime(stale[0], (time.time() - 7200,) * 2)
        live_lock = owners / f"{live.owner}.lock"
        os.utime(live_lock, (time.time() - 7200,) * 2)
        assert second.claim_orphans() == []
        assert not stale[0].exists() and live_lock.exists()
        for store in (live, second):
            store.close()

    def test_concurrent_writers(self, tmp_path):
        """Threads of two store instances (two connections) released at once by a barrier: every write lands."""
        path = tmp_path / JOB_STORE_NAME
        stores = [SqliteJobStore(path), SqliteJobStore(path)]
        threads_n, jobs_per_thread = 8, 15

        def writer(i: int) -> list[Job]:
            store, written = stores[i % 2], []
            for _ in range(jobs_per_thread):
                job = _job(collection=f"c{i}", files=3)
                store.save(job)
                job.state = "running"
                store.save(job)
                for f in job.files:
                    f.status, f.added = "indexed", 1
                    store.save(job)
                    assert store.load(job.id).files == job.files
                job.state = "done"
                store.save(job)
                written.append(job)
            return written

        written = [job for jobs in run_together(threads_n, writer) for job in jobs]
        assert len(written) == threads_n * jobs_per_thread
        fresh = SqliteJobStore(path)
        for job in written:
            assert fresh.load(job.id) == job
        for store in (*stores, fresh):
            store.close()


class FakeReport:
    def __init__(self, added=0, errors=()):
        self.added, self.updated, self.errors = added, 0, list(errors)


class FakeStack:
    """Stands in for a RetrievalStack: records what was ingested; `fail` makes it raise."""

    def __init__(self, fail: Exception | None = None):
        self.ingested: list[str] = []
        self.scopes: list = []
        self.fail = fail

    def ingestor(self, progress=False):
        return self

    def run(self, paths, acl=None, scope=ALL):
        if self.fail:
            raise self.fail
        self.ingested += [Path(p).name for p in paths]
        self.scopes.append(scope)
        return FakeReport(added=1)


def _wait(jobs: IngestJobs, job_id: str, timeout: float = 30) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = jobs.get(job_id)
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    pytest.fail(f"job {job_id} did not finish: {job}")


class TestRecovery:
    """IngestJobs.recover over a job store left by a process that died mid-job (no models, a fake stack)."""

    def _left_behind(self, tmp_path, attempts: int = 1, scope: str = "ALL") -> tuple[Path, str]:
        up = tmp_path / "up"
        (up / "c").mkdir(parents=True)
        for name in ("a.txt", "b.txt", "c.txt"):
            (up / "c" / name).write_text(name)
        path = tmp_path / "index" / JOB_STORE_NAME
        _in_other_process(
            "import sys, os; from switchyard.service.job_store import *; s = SqliteJobStore(sys.argv[1]); up = sys.argv[2]; "
            "from switchyard.run_context import ALL; "
            "sc = ALL if sys.argv[4] == 'ALL' else tuple(filter(None, sys.argv[4].split(','))); "
            "j = Job(id='0' * 32, collection='c', state='running', attempts=int(sys.argv[3]), owner=s.owner, "
            "files=[FileStatus(n, os.path.join(up, 'c', n)) for n in ('a.txt', 'b.txt', 'c.txt')], scope=sc); "
            "j.files[0].status = 'indexed'; s.save(j); os._exit(0)",
            str(path),
            str(up),
            str(attempts),
            scope,
        )
        return up, str(path)

    def test_resumed_job_ingests_the_files_not_yet_reported(self, tmp_path):
        up, path = self._left_behind(tmp_path)
        stack = FakeStack()
        jobs = IngestJobs(up, lambda c: stack, SqliteJobStore(path))
        assert jobs.recover() == ["0" * 32]
        job = _wait(jobs, "0" * 32)
        assert job["state"] == "done" and job["resumed"] is True
        assert [f["status"] for f in job["files"]] == ["indexed", "indexed", "indexed"]
        assert stack.ingested == ["b.txt", "c.txt"]
        assert jobs.recover() == []  # nothing is resumed twice
        jobs.shutdown()

    @pytest.mark.parametrize("scope", [("hr", "legal"), ()])
    def test_a_resumed_job_writes_as_its_uploader_reads(self, tmp_path, scope):
        up, path = self._left_behind(tmp_path, scope=",".join(scope))
        stack = FakeStack()
        jobs = IngestJobs(up, lambda c: stack, SqliteJobStore(path))
        jobs.recover()
        assert _wait(jobs, "0" * 32)["state"] == "done"
        assert stack.scopes == [scope, scope]  # not ALL: the restart does not widen the job's writes
        jobs.shutdown()

    def test_a_job_that_cannot_be_resumed_fails_with_a_reason(self, tmp_path):
        up, path = self._left_behind(tmp_path)
        jobs = IngestJobs(up, lambda c: FakeStack(fail=RuntimeError("index unreachable")), SqliteJobStore(path))
        jobs.recover()
        job = _wait(jobs, "0" * 32)
        assert job["state"] == "failed" and job["resumed"] is True
        assert job["error"] == "the server stopped during the job; resuming it failed: RuntimeError: index unreachable"
        jobs.shutdown()

    def test_a_job_that_keeps_stopping_the_server_is_not_started_again(self, tmp_path):
        up, path = self._left_behind(tmp_path, attempts=MAX_ATTEMPTS)
        stack = FakeStack()
        jobs = IngestJobs(up, lambda c: stack, SqliteJobStore(path))
        jobs.recover()
        job = jobs.get("0" * 32)
        assert job["state"] == "failed" and "stopped during the job 3 times" in job["error"]
        assert stack.ingested == []
        jobs.shutdown()

    def test_a_graceful_stop_leaves_the_rest_of_the_job_to_the_next_start(self, tmp_path):
        started, release = threading.Event(), threading.Event()
        path = tmp_path / "index" / JOB_STORE_NAME

        class Blocking(FakeStack):
            def run(self, paths, acl=None, scope=ALL):
                started.set()
                release.wait(timeout=30)
                return super().run(paths)

        jobs = IngestJobs(tmp_path / "up", lambda c: Blocking(), SqliteJobStore(path))
        staged = jobs.staging()
        for name in ("a.txt", "b.txt"):
            (staged / name).write_text(name)
        job = jobs.submit("c", staged, ["a.txt", "b.txt"])
        assert started.wait(timeout=30)
        stopper = threading.Thread(target=jobs.shutdown)
        stopper.start()
        assert jobs._stopping.wait(timeout=30)  # the stop is under way before the file in progress ends
        release.set()  # the file in progress finishes, the next one is left
        stopper.join(timeout=30)
        peek = SqliteJobStore(path)
        left = peek.load(job.id)
        peek.close()
        assert left.state == "running" and [f.status for f in left.files] == ["indexed", "queued"]
        stack = FakeStack()
        restarted = IngestJobs(tmp_path / "up", lambda c: stack, SqliteJobStore(path))
        assert restarted.recover() == [job.id]
        assert _wait(restarted, job.id)["state"] == "done" and stack.ingested == ["b.txt"]
        restarted.shutdown()

    def test_an_accepted_upload_is_in_place_and_recorded_before_it_runs(self, tmp_path):
        started, release = threading.Event(), threading.Event()

        class Blocking(FakeStack):
            def run(self, paths, acl=None, scope=ALL):
                started.set()
                release.wait(timeout=30)
                return super().run(paths)

        jobs = IngestJobs(tmp_path / "up", lambda c: Blocking(), SqliteJobStore(tmp_path / "index" / JOB_STORE_NAME))
        first = jobs.staging()
        (first / "a.txt").write_text("a")
        blocker = jobs.submit("c", first, ["a.txt"])
        assert started.wait(timeout=30)
        staged = jobs.staging()
        (staged / "x.txt").write_text("x")
        job = jobs.submit("c", staged, ["x.txt"])
        assert len(job.id) == 32 and int(job.id, 16) >= 0
        assert (tmp_path / "up" / "c" / "x.txt").read_text() == "x" and not staged.exists()
        other = SqliteJobStore(tmp_path / "index" / JOB_STORE_NAME)  # what a restarted server would read
        assert other.load(job.id).state == "queued" and other.load(blocker.id).state == "running"
        other.close()
        release.set()
        assert _wait(jobs, job.id)["state"] == "done"
        jobs.shutdown()

    def test_concurrent_uploads_and_reads(self, tmp_path):
        """Threads released at once by a barrier submit uploads (same and different names) while others read jobs:
        every job is recorded, runs and answers; every file is in place."""
        stack = FakeStack()
        path = tmp_path / "index" / JOB_STORE_NAME
        jobs = IngestJobs(tmp_path / "up", lambda c: stack, SqliteJobStore(path))
        threads_n = 8

        def uploader(i: int) -> list[str]:
            ids = []
            for k in range(5):
                staged = jobs.staging()
                names = [f"own-{i}-{k}.txt", "shared.txt"]
                for name in names:
                    (staged / name).write_text(f"{i} {k} {name}")
                job = jobs.submit(f"c{i % 2}", staged, names)
                ids.append(job.id)
                assert jobs.get(job.id)["progress"]["files_total"] == 2
            return ids

        ids = [job_id for per_thread in run_together(threads_n, uploader) for job_id in per_thread]
        assert len(set(ids)) == threads_n * 5
        for job_id in ids:
            assert _wait(jobs, job_id)["state"] == "done"
        assert sorted(stack.ingested) == sorted(
            [f"own-{i}-{k}.txt" for i in range(threads_n) for k in range(5)] + ["shared.txt"] * threads_n * 5
        )
        for i in range(threads_n):
            for k in range(5):
                assert (tmp_path / "up" / f"c{i % 2}" / f"own-{i}-{k}.txt").read_text() == f"{i} {k} own-{i}-{k}.txt"
        assert not list((tmp_path / "up" / ".staging").iterdir())
        jobs.shutdown()
        fresh = SqliteJobStore(path)
        assert all(fresh.load(job_id).state == "done" for job_id in ids)
        fresh.close()


def _note(i: int, version: str) -> bytes:
    """A markdown note; version A is one short paragraph, version B several chunks' worth. Every sentence names its
    version, so every chunk shows which version it came from."""
    import random

    rng = random.Random(i)
    words = "locomotive freight yard signal switch coupler brake ballast sleeper gauge rail depot siding".split()
    paragraphs = 1 if version == "A" else 5
    body = "\n\n".join(
        " ".join(
            f"Note {i} version {version} paragraph {p} sentence {s} mentions the "
            + " ".join(rng.choice(words) for _ in range(8))
            + "."
            for s in range(6)
        )
        for p in range(paragraphs)
    )
    return f"# Yard note {i}\n\n{body}\n".encode()


def _chunks_by_file(index: Path) -> dict[str, list[dict]]:
    """The committed chunks of collection `bulk`, by source file name, read straight from the index."""
    from switchyard.retrievers.store import IndexStore

    store = IndexStore(str(index), "bulk")
    out: dict[str, list[dict]] = {}
    for row in store.scan(["doc_id", "source", "text", "doc_hash", "chunk_index"], scope=ALL).to_pylist():
        out.setdefault(Path(row["source"]).name, []).append(row)
    return out


@pytest.mark.slow
class TestKilledServer:
    """kill -9 a real server in the middle of an upload job, restart it on the same index and upload folder.

    The kill lands at a known point: the server runs with SWITCHYARD_TEST_HOLD_JOB_AFTER_FILES=HOLD, so the job's
    worker stops once file HOLD is committed to the index and before the job store records it (the narrowest window:
    the index is ahead of the job's record)."""

    N, OLD, HOLD = 8, 5, 3  # files in the job; the first OLD were uploaded before as version A; the kill's point

    def _expected_chunks(self, tmp_path, embedder, names) -> dict[str, dict[str, int]]:
        """Chunks per file that a clean ingest of each version gives, in another index."""
        from switchyard.configs.loader import load_config
        from switchyard.retrievers.stack import RetrievalStack

        expected: dict[str, dict[str, int]] = {}
        for version in ("A", "B"):
            folder = tmp_path / f"clean-{version}"
            folder.mkdir()
            for i, n in enumerate(names):
                (folder / n).write_bytes(_note(i, version))
            stack = RetrievalStack(
                load_config("no-llm", [f"store.uri={tmp_path / 'clean-index'}"]),
                collection=f"clean{version}",
                embedder=embedder,
            )
            assert stack.ingestor(progress=False).run([folder]).added == len(names)
            expected[version] = {Path(d["source"]).name: d["chunks"] for d in stack.store.list_documents(ALL)}
        assert all(expected["B"][n] > expected["A"][n] for n in names)
        return expected

    def test_kill_mid_job_then_restart_resumes_it(self, tmp_path, index_copy, embedder):
        from tests.service.conftest import running_server

        names = [f"note{i:02d}.md" for i in range(self.N)]
        new = {n: _note(i, "B") for i, n in enumerate(names)}
        expected = self._expected_chunks(tmp_path, embedder, names)
        args = ("--config", "no-llm", "--no-warm-up")

        with running_server(tmp_path, index_copy, *args) as srv, srv.client(timeout=60) as c:
            old = [("files", (n, _note(i, "A"))) for i, n in enumerate(names[: self.OLD])]
            first = c.post("/v1/collections/bulk/documents", files=old).json()["job_id"]
            assert wait_for_job(c, first, timeout=240)["state"] == "done"

        hold = {"SWITCHYARD_TEST_HOLD_JOB_AFTER_FILES": str(self.HOLD)}
        with running_server(tmp_path, index_copy, *args, env=hold) as srv, srv.client(timeout=60) as c:
            r = c.post("/v1/collections/bulk/documents", files=[("files", (n, new[n])) for n in names])
            assert r.status_code == 202, r.text
            job_id = r.json()["job_id"]
            deadline = time.time() + 180
            while f"holding job {job_id} after {self.HOLD} file(s)" not in srv.output():
                assert srv.proc.poll() is None and time.time() < deadline, srv.output()[-3000:]
                time.sleep(0.05)
            job = c.get(f"/v1/jobs/{job_id}").json()
            assert job["state"] == "running" and job["progress"]["files_done"] == self.HOLD - 1, job
            srv.proc.send_signal(signal.SIGKILL)
            assert srv.proc.wait(timeout=30) == -signal.SIGKILL

        # right after the kill: every document is whole; the first HOLD are new (B), the others as before the job
        chunks = _chunks_by_file(index_copy)
        for i, name in enumerate(names):
            rows = chunks.get(name, [])
            want = "B" if i < self.HOLD else "A" if i < self.OLD else None
            if want is None:
                assert not rows, f"{name} is indexed before its turn"
                continue
            assert rows, f"{name} is gone"
            assert {"B" if " version B " in r["text"] else "A" for r in rows} == {want}, f"{name} is half old, half new"
            assert len({r["doc_hash"] for r in rows}) == 1, name
            assert sorted(r["chunk_index"] for r in rows) == list(range(expected[want][name])), name

        with running_server(tmp_path, index_copy, *args) as srv, srv.client(timeout=60) as c:
            assert c.get(f"/v1/jobs/{first}").json()["state"] == "done"  # a job of an earlier process answers
            job = wait_for_job(c, job_id, timeout=240)
            assert job["state"] == "done" and job["resumed"] is True and job["error"] is None, job
            assert job["progress"] == {"files_done": self.N, "files_total": self.N}
            # reported before the kill / committed but not yet recorded at the kill / ingested after the restart
            statuses = ["indexed"] * (self.HOLD - 1) + ["unchanged"] + ["indexed"] * (self.N - self.HOLD)
            assert [f["status"] for f in job["files"]] == statuses, job
            for name in names:  # no accepted file is lost
                assert (tmp_path / "uploads" / "bulk" / name).read_bytes() == new[name]
            docs = {Path(d["source"]).name: d["chunks"] for d in c.get("/v1/collections/bulk/documents").json()}
            assert docs == expected["B"]
            assert all(" version B " in r["text"] for rows in _chunks_by_file(index_copy).values() for r in rows)
            assert "bulk" in [col["name"] for col in c.get("/v1/collections").json()]
            for odd in ("nope", "0" * 32, "x" * 5000, "..%2F..%2Fetc", "%00"):  # bad ids: a JSON 404
                r = c.get(f"/v1/jobs/{odd}")
                assert r.status_code == 404 and "detail" in r.json(), (odd, r.text)
            # the collection takes uploads again
            r = c.post("/v1/collections/bulk/documents", files=[("files", (names[0], _note(0, "A")))])
            again = wait_for_job(c, r.json()["job_id"], timeout=240)
            assert again["state"] == "done" and again["resumed"] is False, again
            assert again["files"][0]["status"] == "indexed" and again["files"][0]["updated"] == 1, again
            docs = {Path(d["source"]).name: d["chunks"] for d in c.get("/v1/collections/bulk/documents").json()}
            assert docs == {**expected["B"], names[0]: expected["A"][names[0]]}
            assert "Traceback" not in srv.output()
