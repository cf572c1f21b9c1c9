"""The program calls itself by the name it was started with: `switchyard` installed, `cli.py` in the repository, in
usage lines, errors and hints; library messages never hard-code either."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from switchyard.errors import program
from tests.conftest import ROOT

LIBRARY = ("package", "graphs", "nodes", "retrievers", "llm", "evaluation", "service", "configs")
INSTALLED = Path(sys.executable).parent / "switchyard"  # the console script of the editable install


@pytest.mark.parametrize(
    ("argv0", "name"),
    [
        ("/work/switchyard/cli.py", "cli.py"),
        ("cli.py", "cli.py"),
        ("/venv/bin/switchyard", "switchyard"),
        ("/venv/bin/uvicorn", "switchyard"),  # a host embedding the library: hints name the installed command
        ("", "switchyard"),
    ],
)
def test_the_name_follows_how_the_process_started(monkeypatch, argv0, name):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert program() == name


def _messages(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal of a module but its docstrings (module, class, function): what it may print or raise."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_library_message_names_cli_py():
    found = []
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            exempt = {  # program() itself compares the started name with "cli.py"
                line
                for f in ast.walk(tree)
                if isinstance(f, ast.FunctionDef) and f.name == "program"
                for line in range(f.lineno, f.end_lineno + 1)
            }
            found += [
                f"{path.relative_to(ROOT)}:{line}: {text!r}"
                for line, text in _messages(tree)
                if "cli.py" in text and line not in exempt
            ]
    assert not found, "library messages name cli.py (use switchyard.errors.program()):\n" + "\n".join(found)


def _run(command: list[str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize(
    ("command", "name"), [([sys.executable, str(ROOT / "cli.py")], "cli.py"), ([str(INSTALLED)], "switchyard")]
)
def test_usage_errors_and_hints_say_the_name_it_was_started_with(tmp_path, command, name):
    assert INSTALLED.exists(), f"{INSTALLED}: the editable install's console script is missing (run setup.sh)"
    usage = _run(command)
    assert usage.returncode == 2 and usage.stderr.startswith(f"usage: {name} "), usage.stderr
    trace = tmp_path / "not-a-trace.json"
    trace.write_text('{"answer": "no steps"}')
    hint = _run(command, "trace", str(trace))
    assert hint.returncode == 1
    assert hint.stderr.strip().endswith(f"expected the JSON printed by `{name} ask --json` (with 'steps' or 'trace')")
    assert "Traceback" not in hint.stderr
