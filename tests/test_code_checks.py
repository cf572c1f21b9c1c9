"""The code checks of .ci/check-code hold, and the layer contract catches an upward import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / ".ci"))
from as_installed import lay_out  # noqa: E402


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in this environment (the dev extra brings it)")
    return str(path)


def _lint_imports(layout: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_tool("lint-imports"), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=layout,
        env={"PYTHONPATH": str(layout), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_lint_and_format_are_clean():
    lint = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout[-3000:]
    fmt = subprocess.run(
        [_tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert fmt.returncode == 0, fmt.stdout[-3000:]


def test_the_layer_contract_is_kept(tmp_path):
    result = _lint_imports(lay_out(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_layer_contract(tmp_path):
    """A copy of the package where a retriever imports the graphs layer: the contract must fail on it."""
    layout = lay_out(tmp_path / "layout")
    retrievers = layout / "switchyard" / "retrievers"
    victim = retrievers / "fusion.py"
    text = victim.read_text()
    victim.unlink()  # a symlink into the checkout: replace it with an edited copy, never touch the source
    victim.write_text("from switchyard.graphs import build  # an upward import\n" + text)
    result = _lint_imports(layout)
    assert result.returncode != 0
    assert "switchyard.retrievers.fusion -> switchyard.graphs.build" in result.stdout
    assert (ROOT / "retrievers" / "fusion.py").read_text() == text


def test_the_layout_maps_every_listed_package(tmp_path):
    layout = lay_out(tmp_path)
    modules = {p.relative_to(layout).as_posix() for p in layout.rglob("*.py")}
    assert {"switchyard/__init__.py", "switchyard/cli.py", "switchyard/graphs/build.py"} <= modules
    assert "switchyard/nodes/strategies/react.py" in modules
    assert all(not m.startswith(("graphs/", "package/")) for m in modules)


@pytest.mark.slow
def test_mypy_is_clean(tmp_path):
    layout = lay_out(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "-p",
            "switchyard",
            "--python-executable",
            sys.executable,
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
        ],
        cwd=layout,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0 and "No module named mypy" in result.stderr:
        pytest.skip("mypy is not installed in this environment (the dev extra brings it)")
    assert result.returncode == 0, result.stdout[-5000:]


def test_check_code_script_runs_every_check():
    script = (ROOT / ".ci" / "check-code").read_text()
    for check in ("ruff check", "ruff format --check", "lint-imports", "mypy"):
        assert check in script
    assert "bash .ci/check-code" in (ROOT / ".ci" / "run").read_text()
    assert shutil.which("bash")
