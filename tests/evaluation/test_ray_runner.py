"""`cli.py eval --ray`: the (config, run, question) grid asked by actors of a real local Ray cluster gives the rows,
report, manifest and reply cache of a local run (tests/ray_cluster.py starts the cluster)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.evaluation.test_harness import DATASET, _timeless, cli, configs
from tests.evaluation.test_recorded_run import replay
from tests.fixtures.record_run import RECORDED, comparable_rows

__all__ = ["configs"]  # the no-LLM configs fixture of the harness tests


def rows(out) -> list[dict]:
    lines = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    return sorted((_timeless(r) for r in lines), key=lambda r: (r["config"], r["run"], r["id"]))


def without_cluster(report: dict) -> dict:
    report = _timeless(report)
    report["manifest"].pop("cluster", None)
    return report


def tree_digest(folder) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
class TestRayEval:
    def test_rows_report_and_manifest_of_a_local_run_and_a_resume(self, tmp_path, configs, ray_cluster):
        common = [
            "--corpus",
            SAMPLES,
            "--configs",
            *configs,
            "--runs",
            "2",
            "--index-dir",
            tmp_path / "index",
            "--no-progress",
        ]
        done = cli("eval", DATASET, *common, "--out", tmp_path / "local")
        assert done.returncode == 0, done.stderr
        # a first run on the cluster stops after 2 questions; the second resumes it
        first = cli("eval", DATASET, *common, "--out", tmp_path / "ray", "--limit", "2", "--ray", ray_cluster.address)
        assert first.returncode == 0, first.stderr
        assert len(rows(tmp_path / "ray")) == 2 * 2 * 2
        done = cli("eval", DATASET, *common, "--out", tmp_path / "ray", "--ray", ray_cluster.address)
        assert done.returncode == 0, done.stderr
        assert "asked 8 question(s)" in done.stdout and "2 Ray actor(s)" in done.stdout

        assert rows(tmp_path / "ray") == rows(tmp_path / "local")
        local, remote = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("local", "ray"))
        assert without_cluster(remote) == without_cluster(local)
        cluster = remote["manifest"]["cluster"]
        assert cluster["ray"] == "2.60.0" and cluster["nodes"] == 2 and cluster["resources"]["CPU"] == 3
        assert "cluster" not in local["manifest"]
        md = [
            [
                line
                for line in (tmp_path / d / "report.md").read_text().splitlines()
                if not line.startswith("- code:") and "latency" not in line.lower()
            ]
            for d in ("local", "ray")
        ]
        extra = [line for line in md[1] if line not in md[0]]
        assert extra == ["- asked on a Ray cluster: Ray 2.60.0, 2 node(s), CPU 3"]
        assert [line for line in md[0] if line not in md[1]] == []

    def test_the_recorded_run_replays_on_the_cluster(self, tmp_path, ray_cluster):
        cache = tree_digest(RECORDED / "llm-cache")
        done = replay(tmp_path / "out", tmp_path / "index", "--ray", ray_cluster.address)
        assert done.returncode == 0, done.stderr
        assert comparable_rows(tmp_path / "out" / "questions.jsonl") == comparable_rows(RECORDED / "results.jsonl")
        assert "replayed from and 0 recorded" in done.stdout
        assert tree_digest(RECORDED / "llm-cache") == cache  # the reply cache as a local replay leaves it

    def test_a_request_never_recorded_is_the_same_clear_error(self, tmp_path, ray_cluster):
        done = replay(tmp_path / "out", tmp_path / "index", "--set", "llm.seed=5", "--ray", ray_cluster.address)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "raise LLMCacheMiss" not in done.stderr  # no traceback of the actors' failed tasks either
        [line] = [x for x in done.stderr.splitlines() if x.startswith("error:")]
        assert line.startswith("error: no recorded LLM reply in ") and "seed 5" in line

    def test_a_local_eval_never_imports_ray(self, tmp_path, configs):
        code = (
            "import sys; from switchyard import cli; code = cli.main(sys.argv[1:]); assert code == 0; "
            "assert 'ray' not in sys.modules, 'ray imported'; print('no ray')"
        )
        args = [
            "eval",
            str(DATASET),
            "--corpus",
            str(SAMPLES),
            "--configs",
            str(configs[0]),
            "--limit",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ]
        proc = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0 and "no ray" in proc.stdout, proc.stderr[-2000:]


def test_without_ray_the_flag_is_one_clear_line(tmp_path, capsys, monkeypatch, configs):
    from switchyard import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without the extra gives
    assert (
        cli.main(
            [
                "eval",
                str(DATASET),
                "--corpus",
                str(SAMPLES),
                "--configs",
                str(configs[0]),
                "--out",
                str(tmp_path / "out"),
                "--ray",
                "auto",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --ray needs Ray: install the ray extra (pip install -e '.[ray]', done by setup.sh)"]
