"""bench/pack_run.py: a recorded run packed in place (one reply file, one vector file per model, one rows file),
every entry read back identical, and a replay from the packed run answering as from the old files."""

import json
import lzma
import subprocess
import sys

import numpy as np

from switchyard.evaluation.jsonl import drop_error_lines, read_results, write_packed_lines
from switchyard.llm.cache import CachingBackend, ReplyStore
from switchyard.retrievers.vector_recording import BASES, VectorRecording, vector_key, write_packed_vectors
from tests.conftest import ROOT
from tests.scripted_backend import ScriptedBackend

IDENTITY = {"backend": "local", "model": "tiny.gguf"}


def pack(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pack_run.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def record_old_layout(cache, n):
    """`n` replies as older runs stored them: one JSON file per key."""
    backend = CachingBackend(
        ScriptedBackend(lambda messages, schema: f"reply {messages[-1]['content']}"), ReplyStore(cache), IDENTITY
    )
    for i in range(n):
        backend.chat([{"role": "user", "content": f"q{i}"}], max_tokens=8, temperature=0.0, seed=1)
    entries = [json.loads(line) for line in (cache / "replies.jsonl").read_text().splitlines()]
    (cache / "replies.jsonl").unlink()
    for entry in entries[:-2]:  # the last two stay in a live run's log
        path = cache / entry["key"][:2] / f"{entry['key']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(entry, ensure_ascii=False, indent=1, sort_keys=True))
    (cache / "replies.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries[-2:]))
    return entries


def test_a_run_is_packed_in_place_and_replays_the_same(tmp_path):
    run = tmp_path / "run"
    entries = record_old_layout(run / "llm-cache", 12)
    texts = [f"text {i}" for i in range(10)]
    values = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    runtime = {"backend": "torch", "precision": "f32"}
    (run / "vectors").mkdir(parents=True)
    write_packed_vectors(  # an older run's whole segment, then a live recording's log, overlapping
        run / "vectors" / "minilm-20260101T000000-0.npz", {"model": "minilm", **runtime, "dim": 4},
        {vector_key("minilm", t): v for t, v in zip(texts[:6], values[:6])},
    )  # fmt: skip
    recording = VectorRecording(run / "vectors", "minilm")
    recording.add(texts[4:], values[4:], runtime)
    recording.flush()
    assert len(list((run / "vectors").glob("minilm-*"))) == 2

    done = pack(run)
    assert done.returncode == 0, done.stderr
    assert "12 replies" in done.stdout and "10 vectors" in done.stdout
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == [
        "llm-cache",
        "llm-cache/replies.jsonl.xz",
        "vectors",
        "vectors/minilm.npz",
    ]
    replay = CachingBackend(None, ReplyStore(run / "llm-cache"), IDENTITY)
    for i, entry in enumerate(entries):
        assert (
            replay.chat([{"role": "user", "content": f"q{i}"}], max_tokens=8, temperature=0.0, seed=1).text
            == entry["reply"]["text"]
            == f"reply q{i}"
        )
    found = VectorRecording(run / "vectors", "minilm", replay=True).lookup(texts)
    assert np.stack(found).tobytes() == values.tobytes()

    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    again = pack(run)  # a packed run: nothing changes
    assert again.returncode == 0 and before == {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}


def test_a_run_extending_a_shared_recording_packs_only_what_it_lacks(tmp_path):
    texts = [f"text {i}" for i in range(6)]
    values = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    shared = VectorRecording(tmp_path / "corpus" / "vectors", "minilm")
    shared.add(texts[:4], values[:4], {"backend": "torch", "precision": "f32"})
    shared.flush()
    vectors = tmp_path / "run" / "vectors"
    vectors.mkdir(parents=True)
    own = VectorRecording(vectors, "minilm")
    own.add(texts, values, {"backend": "torch", "precision": "f32"})  # recorded before it shared: a copy of all six
    own.flush()
    (vectors / BASES).write_text("../../corpus/vectors\n")

    done = pack(tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert "2 vectors" in done.stdout
    assert sorted(p.name for p in vectors.iterdir()) == [BASES, "minilm.npz"]
    assert len(VectorRecording(vectors, "minilm").entries(bases=False)[1]) == 2
    found = VectorRecording(vectors, "minilm", replay=True).lookup(texts)
    assert np.stack(found).tobytes() == values.tobytes()
    before = {p: p.read_bytes() for p in vectors.iterdir()}
    assert pack(tmp_path / "run").returncode == 0 and before == {p: p.read_bytes() for p in vectors.iterdir()}


def test_a_broken_old_file_stops_the_packing_and_deletes_nothing(tmp_path):
    cache = tmp_path / "run" / "llm-cache"
    record_old_layout(cache, 4)
    broken = next(cache.glob("??/*.json"))
    broken.write_text("{broken")
    files = sorted(cache.rglob("*"))
    done = pack(tmp_path / "run", "--replies-only")
    assert done.returncode != 0 and "is not a recorded reply" in done.stderr
    assert sorted(cache.rglob("*")) == files


def rows(n, error_at=()):
    return [
        json.dumps(
            {"config": "c", "run": 0, "id": f"q{i}", "answer": f"é {i}", "error": "boom" if i in error_at else None}
        )
        for i in range(n)
    ]


def test_rows_are_packed_into_one_compressed_file_read_first(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = rows(5)
    (run / "questions.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    expected = read_results(run / "questions.jsonl")

    done = pack(run)
    assert done.returncode == 0, done.stderr
    assert "5 rows in questions.jsonl.xz (questions.jsonl deleted)" in done.stdout
    assert sorted(p.name for p in run.iterdir()) == ["questions.jsonl.xz"]
    assert lzma.decompress((run / "questions.jsonl.xz").read_bytes()).decode() == "".join(x + "\n" for x in lines)
    assert read_results(run / "questions.jsonl") == expected

    # a resumed run appends to questions.jsonl; readers see the packed rows, then the new ones; packing merges
    (run / "questions.jsonl").write_text(rows(7)[5] + "\n" + rows(7)[6] + "\n", encoding="utf-8")
    assert [r["id"] for r in read_results(run / "questions.jsonl")] == [f"q{i}" for i in range(7)]
    assert "7 rows" in pack(run).stdout and not (run / "questions.jsonl").exists()
    assert [r["id"] for r in read_results(run / "questions.jsonl")] == [f"q{i}" for i in range(7)]
    before = (run / "questions.jsonl.xz").read_bytes()
    assert pack(run).returncode == 0 and (run / "questions.jsonl.xz").read_bytes() == before  # nothing to do


def test_retrying_errors_drops_failed_rows_from_the_packed_file_too(tmp_path):
    results = tmp_path / "questions.jsonl"
    write_packed_lines(results, rows(4, error_at={1}))
    results.write_text(rows(6, error_at={5})[4] + "\n" + rows(6, error_at={5})[5] + "\n", encoding="utf-8")
    assert drop_error_lines(results) == 2
    assert [r["id"] for r in read_results(results)] == ["q0", "q2", "q3", "q4"]
    assert drop_error_lines(results) == 0


def test_a_torn_or_broken_rows_file_is_not_packed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "questions.jsonl").write_text(rows(2)[0] + "\n" + rows(2)[1][:10], encoding="utf-8")
    done = pack(run)
    assert done.returncode == 1 and "last line is torn" in done.stderr
    (run / "questions.jsonl").write_text(rows(2)[0] + "\n{not json\n", encoding="utf-8")
    done = pack(run)
    assert done.returncode == 1 and "line 2 is not JSON" in done.stderr
    assert sorted(p.name for p in run.iterdir()) == ["questions.jsonl"]  # nothing written, nothing deleted
