"""`cli.py eval --metrics`: bad requests refused in one line, and answer similarity over the committed recorded run
(tests/fixtures/recorded_run/): recorded into a vector cache, replayed with no embedding runtime, and a replay whose
recording lacks the vectors still reports, without the metric and with a note."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.evaluation.test_recorded_run import NO_MODEL
from tests.fixtures.record_run import RECORDED, eval_args


def cli(*args, no_model=False, timeout=900):
    prefix = [sys.executable, "-c", NO_MODEL] if no_model else [sys.executable]
    return subprocess.run([*prefix, str(ROOT / "cli.py"), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        (["answer_relevance"], "--metrics answer_relevance needs --judge FILE (the LLM that judges it)"),
        (
            ["similarity", "bleu"],
            "--metrics bleu: unknown; choose from similarity, answer_relevance, context_relevance",
        ),
    ],
)
def test_bad_metrics_are_refused_before_any_work(tmp_path, metrics, message):
    done = cli("eval", "x.jsonl", "--configs", "configs/fixed.yaml", "--out", str(tmp_path), "--metrics", *metrics)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_similarity_recorded_then_replayed_without_a_runtime(tmp_path):
    shutil.copytree(RECORDED / "vectors", tmp_path / "vectors")
    args = eval_args(tmp_path / "out", "--set", "llm.replay=true", "--metrics", "similarity", "--baseline", "fixed")
    args[args.index("--vector-cache") + 1] = str(tmp_path / "vectors")
    recorded = cli(*args)  # LLM replies replayed; the answers' and golds' vectors computed and recorded
    assert recorded.returncode == 0, recorded.stderr
    first = json.loads((tmp_path / "out" / "report.json").read_text())
    sims = {name: c["answer_similarity"]["mean"] for name, c in first["configs"].items()}
    assert set(sims) == {"fixed", "agent"} and all(0 < s <= 1 for s in sims.values())
    assert "answer_similarity" in first["paired"]["agent"] and "answer_similarity" in first["configs"]["agent"]["ci95"]
    assert "| answer_similarity |" in (tmp_path / "out" / "report.md").read_text()

    replay = eval_args(tmp_path / "again", "--replay", "--metrics", "similarity", "--baseline", "fixed")
    replay[replay.index("--vector-cache") + 1] = str(tmp_path / "vectors")
    again = cli(*replay, "--index-dir", str(tmp_path / "index"), no_model=True)
    assert again.returncode == 0, again.stderr
    second = json.loads((tmp_path / "again" / "report.json").read_text())
    assert {n: c["answer_similarity"]["mean"] for n, c in second["configs"].items()} == pytest.approx(sims)


@pytest.mark.slow
def test_a_replay_missing_the_vectors_still_reports(tmp_path):
    args = eval_args(tmp_path / "out", "--replay", "--metrics", "similarity", "--index-dir", str(tmp_path / "index"))
    done = cli(*args, no_model=True)
    assert done.returncode == 0, done.stderr
    assert "note: --metrics similarity: some not computed, a vector is not recorded" in done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["configs"]["fixed"]["answer_similarity"]["mean"] is None
    assert "answer_similarity" not in (tmp_path / "out" / "report.md").read_text()


def judge_reply(messages):
    """A judge over HTTP: every claim supported, the questions an answer about couplers answers, and the first
    sentence of every passage relevant."""
    system = messages[0]["content"]
    if "questions" in system:
        return json.dumps({"questions": ["Who patented the knuckle coupler?", "Who patented the coupler?"]})
    if "numbered sentences" in system:
        return json.dumps({"relevant": [1]})
    return json.dumps({"supported": True})


@pytest.mark.slow
def test_judged_metrics_recorded_resumed_and_replayed(tmp_path):
    from tests.scripted_openai_server import ScriptedOpenAIServer

    calls = []

    def reply(messages):
        calls.append(messages)
        return judge_reply(messages)

    shutil.copytree(RECORDED / "vectors", tmp_path / "vectors")
    shutil.copytree(RECORDED / "llm-cache", tmp_path / "llm-cache")
    metrics = ["--metrics", "answer_relevance", "context_relevance", "--baseline", "fixed"]
    with ScriptedOpenAIServer(reply) as server:
        judge = tmp_path / "judge.yaml"
        judge.write_text(f"llm:\n  backend: openai\n  base_url: {server.url}\n  model: scripted-judge\n")
        args = eval_args(tmp_path / "out", "--set", "llm.replay=true", "--judge", str(judge), *metrics)
        for option in ("--vector-cache", "--llm-cache"):
            args[args.index(option) + 1] = str(tmp_path / option.strip("-"))
        first = cli(*args)
        assert first.returncode == 0, first.stderr
        asked = len(calls)
        assert asked > 0
        again = cli(*args)  # a finished judging pass: nothing judged twice
        assert again.returncode == 0, again.stderr
        assert len(calls) == asked
    out = tmp_path / "out"
    judged = {
        m: (out / f"judgements-{m}.jsonl").read_text().splitlines() for m in ("answer_relevance", "context_relevance")
    }
    rows = (out / "questions.jsonl").read_text().splitlines()
    assert all(len(lines) == len(rows) for lines in judged.values())
    report = json.loads((out / "report.json").read_text())
    # the scripted questions are about couplers: q1 (the coupler question) scores high, the others lower
    relevance = {(j["config"], j["id"]): j["answer_relevance"] for j in map(json.loads, judged["answer_relevance"])}
    assert all(
        relevance[(c, "q1")] > 0.8 > max(v for (cc, q), v in relevance.items() if cc == c and q != "q1")
        for c in ("fixed", "agent")
    )
    for name, config in report["configs"].items():
        assert 0 < config["answer_relevance"]["mean"] < 1.0, name
        assert 0 < config["context_relevance"]["mean"] <= 1.0, name
    assert {"answer_relevance", "context_relevance"} <= set(report["paired"]["agent"])
    assert "| context_relevance |" in (out / "report.md").read_text()

    # the judge's replies and the questions' vectors were recorded: a replay needs no judge, LLM or embedding runtime
    replay = eval_args(tmp_path / "replayed", "--replay", "--judge", str(judge), *metrics)
    for option in ("--vector-cache", "--llm-cache"):
        replay[replay.index(option) + 1] = str(tmp_path / option.strip("-"))
    done = cli(*replay, "--index-dir", str(tmp_path / "index"), no_model=True)
    assert done.returncode == 0, done.stderr
    replayed = json.loads((tmp_path / "replayed" / "report.json").read_text())
    for metric in ("answer_relevance", "context_relevance"):
        assert {n: c[metric]["mean"] for n, c in replayed["configs"].items()} == pytest.approx(
            {n: c[metric]["mean"] for n, c in report["configs"].items()}
        )
