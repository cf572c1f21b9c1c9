"""The committed recorded run (tests/fixtures/recorded_run/, see tests/fixtures/record_run.py): a real run of the
local model, fixed pipeline vs agent over the sample corpus, replayed here with no model at all."""
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.fixtures.record_run import RECORDED, comparable_rows, eval_args

pytestmark = pytest.mark.slow

# cli.py with llama-cpp-python made unimportable: a replay that tried to load the GGUF would fail
NO_MODEL = ("import runpy, sys; sys.modules['llama_cpp'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")


def replay(out, index, *extra):
    return subprocess.run([sys.executable, "-c", NO_MODEL, str(ROOT / "cli.py"),
                           *eval_args(out, "--replay", "--index-dir", str(index), *extra)],
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return tmp_path_factory.mktemp("recorded") / "index"


def test_the_replayed_run_equals_the_recorded_one(tmp_path, index):
    done = replay(tmp_path / "out", index)
    assert done.returncode == 0, done.stderr
    recorded = comparable_rows(RECORDED / "results.jsonl")
    replayed = comparable_rows(tmp_path / "out" / "questions.jsonl")
    assert {r["config"] for r in recorded} == {"fixed", "agent"} and all(r["llm_calls"] > 0 for r in recorded)
    assert replayed == recorded
    manifest = json.loads((tmp_path / "out" / "report.json").read_text())["manifest"]
    assert manifest["llm_cache"] == {"dir": str(RECORDED / "llm-cache"), "mode": "replay"}
    assert "replayed from and 0 recorded" in done.stdout


def test_a_request_never_recorded_is_a_clear_error(tmp_path, index):
    done = replay(tmp_path / "out", index, "--set", "llm.seed=5")  # every LLM request is new
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: no recorded LLM reply in ") and "seed 5" in line
    assert "user: 'Who patented the knuckle coupler?'" in line
    assert not (tmp_path / "out" / "questions.jsonl").read_text().strip()  # no question counted as failed


def test_replay_needs_a_cache_folder(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "cli.py"), "eval", "x.jsonl", "--configs", "c.yaml",
                           "--replay"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--replay needs --llm-cache DIR" in done.stderr
