"""The benchmarks as one suite (bench/__main__.py, bench/registry.py, bench/results.py): one registry, one result
schema, and docs/benchmarks.md's generated tables equal to what their committed result files render."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
registry = pytest.importorskip("registry")
results = pytest.importorskip("results")


def test_every_script_in_bench_is_a_registered_benchmark_or_a_helper():
    scripts = {p.relative_to(ROOT / "bench").as_posix() for p in (ROOT / "bench").glob("*.py")}
    scripts |= {p.relative_to(ROOT / "bench").as_posix() for p in (ROOT / "bench" / "calibration").glob("*.py")}
    registered = {b.script for b in registry.BENCHMARKS.values()}
    assert registered <= scripts, f"registered but missing: {registered - scripts}"
    unregistered = {s for s in scripts - registered - registry.HELPERS if "/" not in s}  # calibration/: steps
    assert unregistered == set(), "register these in bench/registry.py (or as HELPERS)"


def test_a_result_file_holds_the_figures_and_where_they_came_from(tmp_path):
    path = results.record("probe", {"p50_ms": 12.5, "nested": {"a": 1}}, {"runs": 2}, folder=tmp_path)
    result = json.loads(path.read_text())
    assert result["schema"] == results.SCHEMA and result["benchmark"] == "probe"
    assert result["figures"] == {"p50_ms": 12.5, "nested": {"a": 1}}
    assert len(result["commit"]["sha"]) == 40 and isinstance(result["commit"]["dirty"], bool)
    assert result["machine"]["cores"] >= 1 and result["machine"]["python"].startswith("3.")
    assert result["config_hash"] == results.config_hash({"runs": 2}) != results.config_hash({"runs": 3})
    assert results.load("probe", tmp_path) == result


def test_the_docs_tables_are_what_the_committed_results_render():
    pages = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}
    blocks = [(name, b) for name, text in pages.items() for b in results.BLOCK.finditer(text)]
    assert {name for name, _ in blocks} >= {"benchmarks.md", "question-sets.md"}, "generated tables went missing"
    for name, block in blocks:
        assert results.result_path(block["name"]).is_file(), f"{name}: no committed result {block['name']}"
    stale = [name for name, text in pages.items() if results.render_blocks(text) != text]
    assert not stale, f"a generated table differs from its result in {stale}: python -m bench report"


def test_a_figure_edited_by_hand_is_found(tmp_path):
    results.record("probe", {"import switchyard": {"seconds": 0.12, "rss_mb": 14.4}}, folder=tmp_path)
    rendered = results.render_blocks("<!-- result: probe imports -->\n<!-- end result -->\n", tmp_path)
    assert "| `import switchyard` | 0.12 | 14 |" in rendered
    assert results.render_blocks(rendered, tmp_path) == rendered
    edited = rendered.replace("| 0.12 |", "| 0.10 |")
    assert results.render_blocks(edited, tmp_path) != edited


def test_the_suite_lists_and_checks_from_the_command_line():
    listed = subprocess.run([sys.executable, "-m", "bench", "list"], cwd=ROOT, capture_output=True, text=True)
    assert listed.returncode == 0 and set(registry.BENCHMARKS) <= {
        line.split()[0] for line in listed.stdout.splitlines()
    }
    check = subprocess.run(
        [sys.executable, "-m", "bench", "report", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    unknown = subprocess.run([sys.executable, "-m", "bench", "run", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert unknown.returncode == 2 and "invalid choice: 'nope'" in unknown.stderr


def test_every_table_of_figures_has_a_result_behind_it():
    found = results.unbacked((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8"))
    assert found == [], "these sections quote figures with no result file (record one, generate the table)"


def test_what_counts_as_a_result_behind_a_table(tmp_path):
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    run = "bench/eval/agent-compare-phantomwiki-s11-all"  # a committed eval folder: report.json, manifest.json
    page = (
        f"# Page\n\n## Generated\n\n<!-- result: probe imports -->\n{table}<!-- end result -->\n\n"
        f"## An eval run\n\n{table}\nFrom {run}.\n\n"
        "## A schema file\n\n" + table + "\nbench/eval/retrieval-selection/dev-select.json\n\n"
        "## Hand-copied\n\n" + table + "\nbench/eval/conversation-retrieval/dev-grid.json (not in the schema)\n\n"
        "## Prose only\n\nNo table here, 12 ms.\n\n"
        "## A fence\n\n```bash\n# not a heading\n```\n\n" + table
    )
    assert results.unbacked(page) == ["Hand-copied", "A fence"]


def test_the_dev_loop_reads_pytest_and_ci_output():
    dev_loop = pytest.importorskip("dev_loop")
    ci = "ci: set-up took 225 s\n...\n1692 passed, 21 skipped, 3 warnings in 2373.41s (0:39:33)\n"
    assert dev_loop.setup_seconds(ci) == 225
    assert dev_loop.pytest_summary(ci) == {"passed": 1692, "skipped": 21, "warnings": 3, "seconds": 2373.4}
    assert dev_loop.pytest_summary("==== 1364 passed in 78.20s (0:01:18) ====") == {"passed": 1364, "seconds": 78.2}
    assert dev_loop.pytest_summary("3 failed, 10 passed in 5.0s") == {"failed": 3, "passed": 10, "seconds": 5.0}
    assert dev_loop.pytest_summary("collected 3 items") == {} and dev_loop.setup_seconds("") is None
