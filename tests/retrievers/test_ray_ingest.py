"""`cli.py ingest --ray`: the same collection as a local ingest, built on a real local Ray cluster
(tests/ray_cluster.py).

Local runs go through cli.main in this process; Ray runs are `cli.py` subprocesses, as a user runs them (this test
process never imports Ray)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from switchyard.retrievers.store import E5_COLUMN
from switchyard.run_context import ALL
from tests.conftest import ROOT, SAMPLES
from tests.retrievers.test_object_store import s3_endpoint, s3_overrides

__all__ = ["s3_endpoint"]  # the module-scoped moto fixture, used here too

pytestmark = pytest.mark.slow


def env() -> dict:
    """This process's environment (the moto fixture's credentials included), offline, importing this checkout."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


QUERIES = ["Who patented the knuckle coupler?", "What does a distant signal show?", "hump yard sorting"]


def cli_local(capsys, *args: str) -> str:
    from switchyard import cli

    capsys.readouterr()
    code = cli.main(list(args))
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def cli_ray(cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args, "--no-progress", "--ray", cluster.address],
        capture_output=True,
        text=True,
        env=env(),
        cwd=ROOT,
        timeout=600,
    )
    assert not check or proc.returncode == 0, proc.stderr[-3000:]
    return proc


def summary(out: str) -> str:
    """The counts of an ingest's summary line, without its timing."""
    line = out.strip().splitlines()[-1]
    return line.split(" chunks written")[0] + line.split(" in ")[1].split("s;", 1)[1]


def table(overrides: list[str]):
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    stack = RetrievalStack(load_config(None, overrides))
    return stack.store


def rows(store) -> tuple[list[dict], np.ndarray]:
    """Every chunk row (sorted by chunk id) and its vectors in that order: MiniLM's, then e5's (the default's vector
    field) beside them where the collection has them."""
    vector_columns = [c for c in ("vector", E5_COLUMN) if c in store.table().schema.names]
    columns = [c for c in store.table().schema.names if c not in ("vector", "window_vectors", E5_COLUMN)]
    data = sorted(store.scan(columns + vector_columns, scope=ALL).to_pylist(), key=lambda r: r["chunk_id"])
    vectors = np.array([np.concatenate([r.pop(c) for c in vector_columns]) for r in data], dtype=np.float32)
    return data, vectors


def assert_same_collection(capsys, local: list[str], remote: list[str]) -> None:
    """The two indexes hold the same documents, chunks, hashes and (nearly) the same vectors; list, search and a
    no-LLM ask give the same output."""
    a, b = table(local), table(remote)
    rows_a, vec_a = rows(a)
    rows_b, vec_b = rows(b)
    assert rows_a == rows_b
    assert np.allclose(vec_a, vec_b, atol=2e-3)
    assert a.metadata() == b.metadata()
    assert a.has_text_index() and b.has_text_index()
    flags = lambda ov: [x for o in ov for x in ("--set", o)]  # noqa: E731
    assert cli_local(capsys, "list", "--json", *flags(local)) == cli_local(capsys, "list", "--json", *flags(remote))
    for query in QUERIES:
        hits = [
            [
                (p["chunk_id"], round(p["score"], 4))
                for p in json.loads(cli_local(capsys, "search", query, "--json", *flags(ov)))["results"]
            ]
            for ov in (local, remote)
        ]
        assert hits[0] == hits[1] and hits[0]
    answers = [
        json.loads(cli_local(capsys, "ask", QUERIES[0], "--json", "--config", "configs/no-llm.yaml", *flags(ov)))
        for ov in (local, remote)
    ]
    assert [answers[0][k] for k in ("answer", "citations")] == [answers[1][k] for k in ("answer", "citations")]


def make_corpus(folder: Path, docs: int = 240, version: str = "a") -> Path:
    """`docs` short text files (a few chunks' worth of embedding work each): long enough to kill things mid-ingest."""
    folder.mkdir(parents=True, exist_ok=True)
    words = ["signal", "yard", "coupler", "gauge", "track", "brake", "wagon", "hump", "switch", "timetable"]
    for i in range(docs):
        body = " ".join(
            f"{words[(i + j) % 10]} {words[(i * j) % 10]} number {j} of document {i}{version}." for j in range(40)
        )
        (folder / f"doc-{i:04d}.txt").write_text(f"Document {i}\n\n{body}\n")
    return folder


class TestRayIngest:
    def test_the_same_collection_as_a_local_ingest_then_incremental_changes_and_deletes(
        self, tmp_path, capsys, ray_cluster
    ):
        corpus = tmp_path / "corpus"
        shutil.copytree(SAMPLES, corpus)
        (corpus / "extra.jsonl").write_text(
            json.dumps({"id": "wagon-1", "title": "Wagons", "text": "A wagon is an unpowered railway vehicle."})
            + "\n"
            + json.dumps({"id": "brake-1", "title": "Brakes", "text": "Air brakes stop a train."})
            + "\n"
        )
        local = [f"store.uri={tmp_path / 'local'}"]
        remote = [f"store.uri={tmp_path / 'ray'}"]
        first = cli_local(capsys, "ingest", str(corpus), "--no-progress", "--set", local[0])
        out = cli_ray(ray_cluster, "ingest", str(corpus), "--set", remote[0]).stdout
        assert summary(out) == summary(first) and "0 error(s)" in out
        assert_same_collection(capsys, local, remote)

        # nothing changed: nothing written
        out = cli_ray(ray_cluster, "ingest", str(corpus), "--set", remote[0]).stdout
        assert "0 added, 0 updated, 7 unchanged, 0 removed; 0 chunks written" in out

        # a changed file, a record gone from a corpus file, a new file: the same as a local re-ingest
        (corpus / "track-gauge.txt").write_text((corpus / "track-gauge.txt").read_text() + "\nGauges vary.\n")
        (corpus / "extra.jsonl").write_text(
            json.dumps({"id": "wagon-1", "title": "Wagons", "text": "A wagon is an unpowered railway vehicle."}) + "\n"
        )
        (corpus / "new.md").write_text("# Turntables\n\nA turntable turns locomotives around.\n")
        second = cli_local(capsys, "ingest", str(corpus), "--no-progress", "--set", local[0])
        out = cli_ray(ray_cluster, "ingest", str(corpus), "--set", remote[0]).stdout
        assert summary(out) == summary(second)
        assert "1 added, 1 updated, 5 unchanged, 1 removed" in out
        assert_same_collection(capsys, local, remote)

    def test_on_the_s3_compatible_store(self, tmp_path, capsys, ray_cluster, s3_endpoint):
        remote = s3_overrides(s3_endpoint, collection="ray")
        local = [f"store.uri={tmp_path / 'local'}"]
        cli_local(capsys, "ingest", str(SAMPLES), "--no-progress", "--set", local[0])
        proc = subprocess.run(  # the credentials reach the driver only: the workers never open the store
            [
                sys.executable,
                str(ROOT / "cli.py"),
                "ingest",
                str(SAMPLES),
                "--no-progress",
                "--ray",
                ray_cluster.address,
                *[x for o in remote for x in ("--set", o)],
            ],
            capture_output=True,
            text=True,
            env=env(),
            cwd=ROOT,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "5 added" in proc.stdout
        assert_same_collection(capsys, local, remote)

    def test_an_actor_killed_mid_ingest_is_replaced_and_the_result_is_complete(self, tmp_path, capsys, ray_cluster):
        corpus = make_corpus(tmp_path / "corpus")
        local = [f"store.uri={tmp_path / 'local'}", "ingest.batch_docs=8"]
        remote = [f"store.uri={tmp_path / 'ray'}", "ingest.batch_docs=8"]
        cli_local(capsys, "ingest", str(corpus), "--no-progress", *[x for o in local for x in ("--set", o)])
        proc = start_ray_ingest(ray_cluster, corpus, remote)
        try:
            wait_for_commits(remote, proc, commits=2)
            actors = ray_cluster.actor_pids()
            assert actors and proc.poll() is None
            os.kill(actors[0], signal.SIGKILL)
            out, err = proc.communicate(timeout=600)
        finally:
            proc.kill()
        assert proc.returncode == 0, err[-3000:]
        assert "240 added" in out
        assert_same_collection(capsys, local, remote)

    def test_a_driver_killed_mid_ingest_leaves_the_last_commit_and_a_rerun_finishes(
        self, tmp_path, capsys, ray_cluster
    ):
        corpus = make_corpus(tmp_path / "corpus")
        local = [f"store.uri={tmp_path / 'local'}", "ingest.batch_docs=8"]
        remote = [f"store.uri={tmp_path / 'ray'}", "ingest.batch_docs=8"]
        flags = [x for o in remote for x in ("--set", o)]
        cli_local(capsys, "ingest", str(corpus), "--no-progress", *flags)  # the collection before: version a
        before = {d["doc_id"]: d for d in json.loads(cli_local(capsys, "list", "--json", *flags))}
        make_corpus(corpus, version="b")  # every document changes
        proc = start_ray_ingest(ray_cluster, corpus, remote)
        try:
            wait_for_commits(remote, proc, commits=2)
            assert proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            proc.kill()
        store = table(remote)
        committed = store.version()
        assert store.table().list_versions()[-1]["version"] == committed
        data, _ = rows(store)
        by_doc: dict[str, list[dict]] = {}
        for row in data:
            by_doc.setdefault(row["doc_id"], []).append(row)
        assert set(by_doc) == set(before)  # no document lost or half-written: each is version a or b, whole
        versions = {doc: {"b." in r["text"] for r in chunks} for doc, chunks in by_doc.items()}
        assert all(len(v) == 1 for v in versions.values())
        assert any(v == {True} for v in versions.values()) and any(v == {False} for v in versions.values())
        assert all(len({r["doc_hash"] for r in chunks}) == 1 for chunks in by_doc.values())

        cli_ray(ray_cluster, "ingest", str(corpus), *flags)
        cli_local(capsys, "ingest", str(corpus), "--no-progress", *[x for o in local for x in ("--set", o)])
        assert_same_collection(capsys, local, remote)

    def test_a_normal_ingest_never_imports_ray(self, tmp_path):
        code = (
            "import sys; from switchyard import cli; code = cli.main(['ingest', sys.argv[1], '--no-progress', '--index-dir', "
            "sys.argv[2]]);"
            "assert code == 0; assert 'ray' not in sys.modules, 'ray imported'; print('no ray')"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, str(SAMPLES), str(tmp_path / "index")],
            cwd=ROOT,
            env=env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0 and "no ray" in proc.stdout, proc.stderr[-2000:]


def start_ray_ingest(cluster, corpus: Path, overrides: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "ingest",
            str(corpus),
            "--no-progress",
            "--ray",
            cluster.address,
            *[x for o in overrides for x in ("--set", o)],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=ROOT,
    )


def wait_for_commits(overrides: list[str], proc, commits: int, timeout: float = 300) -> None:
    """Wait until the ingest has committed `commits` batches past the collection's version when called."""
    deadline = time.monotonic() + timeout
    start = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        store = table(overrides)
        if store.exists():
            version = store.version()
            start = version if start is None else start
            if version >= start + commits:
                return
        elif start is None:
            start = 0
        time.sleep(0.1)
    pytest.fail("the ingest made no commits in time")


def test_without_ray_the_flag_is_one_clear_line(capsys, monkeypatch):
    from switchyard import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without the extra gives
    assert cli.main(["ingest", str(SAMPLES), "--ray", "auto"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --ray needs Ray: install the ray extra (pip install -e '.[ray]', done by setup.sh)"]
