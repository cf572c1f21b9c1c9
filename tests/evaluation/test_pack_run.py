"""bench/pack_run.py: a recorded run packed in place (one reply file, one vector file per model), every entry read
back identical, and a replay from the packed run answering as from the old files."""

import json
import subprocess
import sys

import numpy as np

from switchyard.llm.cache import CachingBackend, ReplyStore
from switchyard.retrievers.vector_recording import VectorRecording
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
    for part in (slice(0, 6), slice(4, 10)):  # two segments, overlapping
        recording = VectorRecording(run / "vectors", "minilm")
        recording.add(texts[part], values[part], {"backend": "torch", "precision": "f32"})
        recording.flush()
    assert len(list((run / "vectors").glob("*.npz"))) == 2

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


def test_a_broken_old_file_stops_the_packing_and_deletes_nothing(tmp_path):
    cache = tmp_path / "run" / "llm-cache"
    record_old_layout(cache, 4)
    broken = next(cache.glob("??/*.json"))
    broken.write_text("{broken")
    files = sorted(cache.rglob("*"))
    done = pack(tmp_path / "run", "--replies-only")
    assert done.returncode != 0 and "is not a recorded reply" in done.stderr
    assert sorted(cache.rglob("*")) == files
