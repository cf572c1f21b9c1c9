"""`run_evaluation` (evaluation/compare.py): `cli.py eval` as a library call — every setting checked before any
work, and a report on exactly the rows compared, in a fixed order, whatever the folder holds."""

import json
import subprocess
import sys

import pytest

from switchyard.errors import LLMCacheMiss, UsageError, VectorCacheMiss
from switchyard.evaluation.compare import run_evaluation
from tests.conftest import FIXTURES, ROOT, SAMPLES

DATASET = FIXTURES / "tiny_qa" / "questions.jsonl"


@pytest.mark.parametrize(
    "settings, error, message",
    [
        ({"runs": 0}, UsageError, "--runs, --workers and --limit must be >= 1"),
        ({"limit": 0}, UsageError, "must be >= 1"),
        ({"replay": True}, UsageError, "--replay needs --llm-cache DIR"),
        ({"replay": True, "llm_cache": "/no/such/replies"}, LLMCacheMiss, "no such folder of recorded replies"),
        ({"replay": True, "vector_cache": "/no/such/vectors"}, VectorCacheMiss, "no such folder of recorded vectors"),
        ({"baseline": "agent"}, UsageError, "--baseline agent is not one of the compared configs"),
        ({"judge": "no-such-pipeline"}, UsageError, "shipped configs:"),
    ],
)
def test_bad_settings_are_refused_before_any_work(tmp_path, settings, error, message):
    out = tmp_path / "out"
    with pytest.raises(error, match=message):
        run_evaluation(DATASET, ["no-llm", "fixed"], out, corpus=SAMPLES, index_dir=tmp_path / "index", **settings)
    assert not out.exists() and not (tmp_path / "index").exists() and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_comparison_reports_exactly_its_rows(tmp_path):
    bm25 = tmp_path / "no-llm-bm25.yaml"
    bm25.write_text((ROOT / "configs" / "no-llm.yaml").read_text() + "retrieve:\n  mode: bm25\n")
    out, index = tmp_path / "out", tmp_path / "index"
    done = run_evaluation(
        DATASET, ["no-llm", bm25], out, limit=3, corpus=SAMPLES, index_dir=index, workers=2, progress=False
    )
    assert done.asked == 6 and done.workers == 2 and done.ray_actors is None and not done.unasked_changes
    assert done.results == out / "questions.jsonl" and len(done.results.read_text().splitlines()) == 6
    assert done.report == json.loads((out / "report.json").read_text())
    assert list(done.report["configs"]) == ["no-llm", "no-llm-bm25"] and done.report["baseline"] == "no-llm"
    assert done.report_md.read_text().startswith("# questions: no-llm, no-llm-bm25\n")
    assert done.llm_cache_counts is None and done.vector_cache_counts is None
    # the folder holds 3 questions of two configs; this comparison is their first 2 questions, the configs in the
    # other order: nothing is asked, and the report covers those rows only, in the order given
    again = run_evaluation(DATASET, [bm25, "no-llm"], out, limit=2, corpus=SAMPLES, index_dir=index, progress=False)
    assert again.asked == 0
    assert list(again.report["configs"]) == ["no-llm-bm25", "no-llm"] and again.report["baseline"] == "no-llm-bm25"
    assert [c["questions"] for c in again.report["configs"].values()] == [2, 2]
    assert len(again.results.read_text().splitlines()) == 6  # the results file is untouched
    # packed for git (bench/pack_run.py): the rows are read from questions.jsonl.xz, nothing is asked again, and
    # the report is the same; a new question is asked and appended to a fresh questions.jsonl
    report = done.report
    packed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pack_run.py"), str(out)], capture_output=True, text=True, timeout=300
    )
    assert packed.returncode == 0 and "6 rows in questions.jsonl.xz" in packed.stdout, packed.stderr
    assert not (out / "questions.jsonl").exists()
    same = run_evaluation(DATASET, ["no-llm", bm25], out, limit=3, corpus=SAMPLES, index_dir=index, progress=False)
    assert same.asked == 0 and _scores(same.report) == _scores(report)
    more = run_evaluation(DATASET, ["no-llm"], out, limit=4, corpus=SAMPLES, index_dir=index, progress=False)
    assert more.asked == 1 and len((out / "questions.jsonl").read_text().splitlines()) == 1
    assert more.report["configs"]["no-llm"]["questions"] == 4


def _scores(report: dict) -> dict:
    """A report's figures without its timings."""
    return {
        name: {k: v for k, v in c.items() if "ms" not in k and "latency" not in k}
        for name, c in report["configs"].items()
    }
