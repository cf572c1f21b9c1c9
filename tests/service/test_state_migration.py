"""`switchyard state migrate --from DIR --to URL`: a single-machine deployment's keys, upload jobs, paused runs and
conversations copied into a real PostgreSQL, usable there by a server, and a second run copies nothing twice."""

from __future__ import annotations

import subprocess
import sys
import time

from switchyard.graphs.conversations import CONVERSATIONS_NAME, ConversationStore
from switchyard.service.job_store import JOB_STORE_NAME, FileStatus, Job, SqliteJobStore
from switchyard.service.keys import KEYS_NAME, FileKeyStore
from switchyard.service.threads import THREADS_NAME, SqlitePausedRuns
from tests.conftest import ROOT


def _one_machine(folder):
    """What a server without --state leaves in its index folder: two keys, a finished and an unfinished upload
    job, a paused run with a checkpoint, a conversation."""
    keys = FileKeyStore(folder / KEYS_NAME)
    key = keys.create("acme", "default", write=True, rpm=60)
    keys.create("ops", admin=True)
    jobs = SqliteJobStore(folder / JOB_STORE_NAME)
    upload = folder / "uploads" / "default" / "yard.txt"
    upload.parent.mkdir(parents=True)
    upload.write_text("The yard turns locomotives.")
    jobs.save(Job("done-1", "default", "done", files=[FileStatus("gone.txt", str(folder / "gone.txt"), "indexed")]))
    jobs.save(Job("open-1", "default", "running", files=[FileStatus("yard.txt", str(upload))], owner="dead"))
    jobs.close()
    runs = SqlitePausedRuns(folder / THREADS_NAME)
    runs.add("t1", "acme", "agent-approve", "default", time.time() + 600)
    paused = ConversationStore(runs.checkpointer)  # any graph's checkpoints: a turn written through LangGraph
    paused.append("t1", "a question", "an answer")
    runs.close()
    chats = ConversationStore.on_disk(folder / CONVERSATIONS_NAME)
    chats.append("chat-1", "Who patented the knuckle coupler?", "Eli Janney.", owner="acme")
    chats.close()
    return key


def _migrate(folder, url) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "state", "migrate", "--from", str(folder), "--to", url],
        capture_output=True,
        text=True,
    )


def test_a_single_machine_state_moves_into_postgresql_once(postgres, tmp_path):
    from switchyard.service.postgres import PostgresJobStore, PostgresState

    key = _one_machine(tmp_path)
    url = postgres.database()
    first = _migrate(tmp_path, url)
    assert first.returncode == 0, first.stderr
    assert (
        "keys 2 copied" in first.stderr and "jobs 2 copied" in first.stderr and "paused runs 1 copied" in first.stderr
    )

    state = PostgresState(url)
    try:
        principal = state.keys.verify(key)  # the same key works against the database
        assert principal.name == "acme" and principal.rpm == 60
        jobs = PostgresJobStore(state)
        assert jobs.load("done-1").state == "done"
        claimed = jobs.claim_orphans()  # the unfinished job arrives without an owner: a server claims it
        assert [j.id for j in claimed] == ["open-1"]
        (tmp_path / "uploads" / "default" / "yard.txt").unlink()  # on another machine: the bytes came along
        assert jobs.file_path(claimed[0], 0).read_text() == "The yard turns locomotives."
        runs = state.paused_runs(tmp_path / "unused", 3600.0)
        assert runs.get("t1").state == "paused" and runs.checkpointer.get_tuple(
            {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        )
        chats = state.conversations(tmp_path / "unused", 86400.0)
        assert [m.content for m in chats.turns("chat-1", "acme")] == [
            "Who patented the knuckle coupler?",
            "Eli Janney.",
        ]
        jobs.close()
    finally:
        state.close()

    again = _migrate(tmp_path, url)
    assert again.returncode == 0 and "keys 0 copied, 2 already there" in again.stderr
    assert "checkpoints 0 copied" in again.stderr


def test_bad_arguments_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("SWITCHYARD_STATE_URL", raising=False)
    missing = _migrate(tmp_path / "nope", "postgresql://u@127.0.0.1:1/x")
    assert missing.returncode == 2 and "no such folder" in missing.stderr and missing.stderr.count("\n") == 1
    wrong = _migrate(tmp_path, "sqlite:///x")
    assert wrong.returncode == 2 and "postgresql://" in wrong.stderr and wrong.stderr.count("\n") == 1
