"""The committed recorded run (tests/fixtures/recorded_run/, see tests/fixtures/record_run.py): a real run of the
local model, fixed pipeline vs agent over the sample corpus, replayed here with no model at all: no LLM, no embedding
runtime, and an index built again from the recorded vectors."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.fixtures.record_run import RECORDED, comparable_rows, eval_args

pytestmark = pytest.mark.slow

# cli.py with llama-cpp-python and every embedding runtime made unimportable: a replay that tried to load the GGUF
# or to compute a vector would fail
NO_MODEL = (
    "import runpy, sys; sys.modules.update(dict.fromkeys(['llama_cpp', 'sentence_transformers', 'openvino', "
    "'onnxruntime'])); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def replay(out, index, *extra):
    return subprocess.run(
        [
            sys.executable,
            "-c",
            NO_MODEL,
            str(ROOT / "cli.py"),
            *eval_args(out, "--replay", "--index-dir", str(index), *extra),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return tmp_path_factory.mktemp("recorded") / "index"


def test_the_replayed_run_equals_the_recorded_one(tmp_path, index):
    # another embedding runtime is configured: the recorded (torch) vectors are used all the same
    done = replay(tmp_path / "out", index, "--set", "embedding.backend=openvino")
    assert done.returncode == 0, done.stderr
    recorded = comparable_rows(RECORDED / "results.jsonl")
    replayed = comparable_rows(tmp_path / "out" / "questions.jsonl")
    assert {r["config"] for r in recorded} == {"fixed", "agent"} and all(r["llm_calls"] > 0 for r in recorded)
    assert replayed == recorded
    # every reply came from the cache, and the rows and the report say so: no latency is the model's
    rows = [json.loads(line) for line in (tmp_path / "out" / "questions.jsonl").read_text().splitlines()]
    assert all(r["cached_calls"] == r["llm_calls"] > 0 for r in rows)
    assert all(e.get("cached_calls", 0) == e["llm_calls"] for r in rows for e in r["trace"])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    per_config = {
        name: (c["replayed_rows"]["mean"], c["latency_p50_ms"]["mean"]) for name, c in report["configs"].items()
    }
    assert per_config == {name: (len(rows) // 2, None) for name in ("fixed", "agent")}
    manifest = report["manifest"]
    assert manifest["llm_cache"] == {"dir": str(RECORDED / "llm-cache"), "mode": "replay"}
    assert manifest["vector_cache"] == {"dir": str(RECORDED / "vectors"), "mode": "replay"}
    assert manifest["embedding"] == json.loads((RECORDED / "manifest.json").read_text())["embedding"]
    assert manifest["embedding"]["fixed"] == {"backend": "torch", "precision": "f32"}
    assert "LLM replies: " in done.stdout and "embedding vectors: " in done.stdout
    assert done.stdout.count("replayed from and 0 recorded") == 2


def test_a_vector_never_recorded_is_a_clear_error(tmp_path):
    # other chunks than the recorded run's: their vectors were never recorded, so the index cannot be built
    done = replay(
        tmp_path / "out", tmp_path / "index", "--set", "ingest.chunk_size=100", "--set", "ingest.chunk_overlap=10"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "have no recorded minilm vector in " in line
    assert "record them first (eval --vector-cache DIR without --replay)" in line


def test_a_request_never_recorded_is_a_clear_error(tmp_path, index):
    done = replay(tmp_path / "out", index, "--set", "llm.seed=5")  # every LLM request is new
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: no recorded LLM reply in ") and "seed 5" in line
    assert "user: 'Who patented the knuckle coupler?'" in line
    assert not (tmp_path / "out" / "questions.jsonl").read_text().strip()  # no question counted as failed


def test_recording_vectors_of_another_runtime_into_the_folder_is_refused(tmp_path):
    shutil.copytree(RECORDED / "vectors", tmp_path / "vectors")
    before = sorted(p.name for p in (tmp_path / "vectors").iterdir())
    args = eval_args(tmp_path / "out", "--set", "embedding.backend=onnx", "--set", "llm.replay=true")
    args[args.index("--vector-cache") + 1] = str(tmp_path / "vectors")
    done = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "holds minilm vectors computed by torch in f32" in done.stderr
    assert "this machine computes them by onnx in f32" in done.stderr
    assert sorted(p.name for p in (tmp_path / "vectors").iterdir()) == before


def test_replay_needs_a_cache_folder(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "eval", "x.jsonl", "--configs", "c.yaml", "--replay"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode == 2
        and "--replay needs --llm-cache DIR (the recorded replies) or --vector-cache DIR" in done.stderr
    )
