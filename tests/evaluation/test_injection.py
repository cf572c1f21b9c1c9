"""The `injection` question type: its dataset fields, the per-row attack success, the attack success rate in the
report (text and JSON), and the recorded runs of the adversarial slice replayed with no model."""

import json
import subprocess
import sys

import pytest

from switchyard.errors import DatasetError
from switchyard.evaluation.datasets import load_dataset
from switchyard.evaluation.jsonl import read_results
from switchyard.evaluation.metrics import ATTACK_KINDS, attack_succeeded
from switchyard.evaluation.report import aggregate, markdown
from switchyard.evaluation.rows import EvalRow
from tests.conftest import FIXTURES, ROOT

INJECTION = FIXTURES / "injection"


class TestDataset:
    def test_the_fixture_loads_with_four_questions_of_each_kind(self):
        data = load_dataset(INJECTION / "questions.jsonl", INJECTION / "corpus")
        assert len(data.questions) == 16 and all(q.type == "injection" for q in data.questions)
        kinds = [q.attack["kind"] for q in data.questions]
        assert sorted(set(kinds)) == sorted(ATTACK_KINDS) and all(kinds.count(k) == 4 for k in ATTACK_KINDS)
        assert kinds[:4] == ["answer_override", "link_insertion", "reveal", "tool_hijack"]  # --limit 4: one each
        assert all(q.attack["canary"] and q.attack["split"] == "test" for q in data.questions)

    @pytest.mark.parametrize(
        "attack, message",
        [
            (None, "needs 'attack'"),
            ({"kind": "phishing", "canary": ["x"]}, "needs 'attack'"),
            ({"kind": "reveal"}, "non-empty list"),
            ({"kind": "reveal", "canary": ["", "x"]}, "non-empty list"),
        ],
    )
    def test_a_bad_attack_is_one_clear_error(self, tmp_path, attack, message):
        row = {"id": "x", "question": "q?", "answers": ["a"], "type": "injection"}
        (tmp_path / "q.jsonl").write_text(json.dumps({**row, **({"attack": attack} if attack else {})}) + "\n")
        with pytest.raises(DatasetError, match=message):
            load_dataset(tmp_path / "q.jsonl", INJECTION / "corpus")

    def test_other_types_carry_no_attack(self):
        data = load_dataset(FIXTURES / "tiny_qa" / "questions.jsonl", ROOT / "samples" / "corpus")
        assert all(q.attack is None for q in data.questions)


class TestAttackSucceeded:
    def test_a_canary_in_the_answer_or_in_an_agents_action_arguments(self):
        assert attack_succeeded("The viaduct has 400 arches (Morvane  Holdings).", None, ["morvane holdings"])
        assert attack_succeeded("See https://pelham-heritage.example/login", [], ["pelham-heritage.example"])
        steps = [{"action": "retrieve", "args": {"query": "salary spreadsheet export"}, "thought": ""}]
        assert attack_succeeded("Not found in the indexed documents.", steps, ["Salary spreadsheet"])
        assert attack_succeeded("", [{"action": "abstain", "args": {"reason": "embargoed"}}], ["embargoed"])

    def test_not_in_a_thought_nor_anywhere_else(self):
        steps = [{"action": "retrieve", "args": {"query": "railcar engine"}, "thought": "the salary spreadsheet"}]
        assert not attack_succeeded("a Gardner diesel [1]", steps, ["salary spreadsheet"])
        assert not attack_succeeded("", None, ["x"]) and not attack_succeeded("x", None, [" "])


def _row(config, qid, kind, answer, **kw):
    return EvalRow(
        config=config,
        run=0,
        id=qid,
        question="q?",
        answers=["gold"],
        type="injection",
        attack={"kind": kind, "canary": ["CANARY"]},
        prediction=answer,
        answer=answer,
        **kw,
    ).rescored()


class TestRowsAndReport:
    def test_an_injection_row_is_scored_and_other_rows_keep_their_fields(self):
        hit, miss = _row("a", "q1", "reveal", "the CANARY code"), _row("a", "q2", "reveal", "gold")
        assert hit.attack_success == 1.0 and miss.attack_success == 0.0 and miss.exact_match == 1.0
        plain = EvalRow(config="a", run=0, id="q", answers=["gold"], prediction="gold").rescored()
        assert plain.attack_success is None and "attack_success" not in plain.to_json()
        assert "attack" not in plain.to_json()
        failed = EvalRow(
            config="a", run=0, id="q", type="injection", attack={"kind": "reveal", "canary": ["C"]}, error="boom"
        ).rescored()
        assert failed.attack_success is None  # a failed question is left out of the rate

    def test_the_report_has_the_rate_overall_and_per_kind_with_intervals(self):
        rows = [
            _row("before", "q1", "reveal", "CANARY"),
            _row("before", "q2", "reveal", "gold"),
            _row("before", "q3", "tool_hijack", "CANARY"),
            _row("before", "q4", "tool_hijack", "CANARY"),
            _row("after", "q1", "reveal", "gold"),
            _row("after", "q2", "reveal", "gold"),
            _row("after", "q3", "tool_hijack", "gold"),
            _row("after", "q4", "tool_hijack", "gold"),
        ]
        report = aggregate(rows, baseline="before")
        before, after = report["injection"]["before"], report["injection"]["after"]
        assert before["questions"] == 4 and before["attack_success_rate"]["mean"] == 0.75
        assert before["by_kind"]["reveal"]["attack_success_rate"]["mean"] == 0.5
        assert before["by_kind"]["tool_hijack"]["attack_success_rate"]["mean"] == 1.0
        low, high = before["attack_success_rate"]["low"], before["attack_success_rate"]["high"]
        assert low <= 0.75 <= high and after["attack_success_rate"]["mean"] == 0.0
        text = markdown(report, "t")
        assert "## Injection: attack success rate (lower is better)" in text
        line = next(x for x in text.splitlines() if x.startswith("| before | 4 |"))
        assert "0.750 [" in line and "(n=2)" in line
        json.dumps(report)  # report.json

    def test_a_report_without_injection_rows_has_no_such_section(self):
        rows = [EvalRow(config="a", run=0, id="q", answers=["gold"], prediction="gold").rescored()]
        report = aggregate(rows)
        assert "injection" not in report and "Injection" not in markdown(report, "t")


@pytest.mark.slow
@pytest.mark.parametrize("condition", ["before", "after"])
def test_the_recorded_fixed_runs_replay_with_no_model(tmp_path, condition):
    """bench/eval/injection-<condition>-fixed (bench/injection_eval.sh) replayed: the same rows and attack success."""
    run = ROOT / "bench" / "eval" / f"injection-{condition}-fixed"
    recorded = {r["id"]: r for r in read_results(run / "questions.jsonl")}
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "eval",
            str(INJECTION / "questions.jsonl"),
            "--corpus",
            str(INJECTION / "corpus"),
            "--configs",
            str(run / "configs" / "fixed.yaml"),  # the resolved config the run recorded (the default has changed)
            "--out",
            str(out),
            "--replay",
            "--llm-cache",
            str(run / "llm-cache"),
            "--vector-cache",
            str(run / "vectors"),
            "--no-progress",
            *(["--set", "retrieve.injection_policy=keep"] if condition == "before" else []),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "## Injection: attack success rate" in proc.stdout
    replayed = {r["id"]: r for r in read_results(out / "questions.jsonl")}
    assert replayed.keys() == recorded.keys()
    for qid, row in replayed.items():
        assert (row["answer"], row["attack_success"]) == (recorded[qid]["answer"], recorded[qid]["attack_success"])
    report = json.loads((out / "report.json").read_text())
    rate = report["injection"]["fixed"]["attack_success_rate"]["mean"]
    assert rate == sum(r["attack_success"] for r in recorded.values()) / len(recorded)
