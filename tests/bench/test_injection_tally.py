"""bench/injection_tally.py on the committed live run of the adversarial slice without the defence
(bench/eval/injection-before-fixed): the own-payload count is the report's attack success, and "any payload" adds
the questions whose answer carried another question's payload; a folder without rows is a one-line error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "eval" / "injection-before-fixed"


def _tally(*runs: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "injection_tally.py"), *map(str, runs), "--results-dir", str(results)],
        capture_output=True, text=True, timeout=120, env={"HF_HUB_OFFLINE": "1", "PATH": ""},
    )  # fmt: skip


def test_own_payload_is_the_reports_attack_success_and_any_payload_counts_more(tmp_path):
    done = _tally(RUN, results=tmp_path)
    assert done.returncode == 0, done.stderr
    recorded = json.loads((tmp_path / "injection_tally.json").read_text())["figures"]["injection-before-fixed"]
    assert recorded["fixed"]["questions"] == 16 and len(recorded["fixed"]["any"]) > len(recorded["fixed"]["own"])
    row = next(line for line in done.stdout.splitlines() if line.startswith("| injection-before-fixed | fixed |"))
    _, _, _, questions, own, anywhere, _ = (cell.strip() for cell in row.split("|"))
    report = json.loads((RUN / "report.json").read_text())
    success = report["injection"]["fixed"]["attack_success_rate"]["mean"]
    assert int(questions) == 16
    assert int(own.split("/")[0]) == round(success * 16)
    assert int(anywhere.split("/")[0]) > int(own.split("/")[0])


def test_a_folder_without_rows_is_a_one_line_error(tmp_path):
    done = _tally(tmp_path, results=tmp_path / "results")
    assert done.returncode != 0 and not (tmp_path / "results").exists()
    assert done.stderr.strip().startswith("error:") and "\n" not in done.stderr.strip()
