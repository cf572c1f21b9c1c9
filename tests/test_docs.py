"""The documentation stays true: the generated config reference matches the schema, README.md stays a small front
door with the exact set-up / main-job / test commands, and every command it names exists. Fast: no model loads."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

SETUP = "bash setup.sh"
MAIN_JOB = (
    '.venv/bin/python cli.py ingest samples/corpus && .venv/bin/python cli.py ask "Who patented the knuckle coupler?"'
)
TESTS = ".venv/bin/python -m pytest -q -n 2 --dist loadfile"
FAST_LANE = '.venv/bin/python -m pytest -q -m "not slow" -n 2 --dist loadfile'


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_reference", DOCS / "gen_config_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}.*?$(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def _commands(block: str) -> list[list[str]]:
    """The commands of a bash block: continuation lines joined, comments dropped, `&&` chains split."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in text.splitlines():
        for part in line.split("&&"):
            argv = shlex.split(part, comments=True)
            cut = next((i for i, arg in enumerate(argv) if arg == "|" or arg.startswith(">")), len(argv))
            argv = argv[:cut]  # drop redirections and pipes
            if argv:
                out.append(argv)
    return out


def _parse_cli(argv: list[str]) -> None:
    """Parse `cli.py ...` arguments with the real parser (no command runs); fails on an unknown command/option."""
    sys.path.insert(0, str(ROOT))
    from switchyard import cli

    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"`cli.py {' '.join(argv)}` does not parse (exit {exc.code})")


# -- the generated configuration reference ----------------------------------------------------------------------


def test_configuration_reference_is_current():
    committed = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert committed == _generator().render(), (
        "docs/configuration.md is out of date with configs/schema.py: run .venv/bin/python docs/gen_config_reference.py"
    )


def test_generator_walks_nested_unions_and_maps():
    class A(BaseModel):
        """Variant A."""

        kind: Literal["a"] = "a"
        size: int = Field(3, ge=1, le=9, description="how big <really> * 2")

    class B(BaseModel):
        kind: Literal["b"] = "b"
        name: str = ""

    class Leaf(BaseModel):
        value: float

    class Root(BaseModel):
        plain: int | None = None
        choice: Annotated[A | B, Field(discriminator="kind")] = A()
        named: dict[str, Leaf] = Field(default_factory=dict, description="named leaves")
        leaf: Leaf | None = None
        mode: Literal["x", "y"] = "y"
        weights: dict[str, float] = Field(default_factory=lambda: {"bm25": 0.5})

    gen = _generator()
    page = gen.render(Root, header="# Test\n")
    assert page == gen.render(Root, header="# Test\n")  # deterministic
    for expected in (
        "- **`plain`** (`int` or `null`; default `null`)",
        "## choice (kind: a)",
        "## choice (kind: b)",
        "chosen by `choice.kind`",
        "- **`choice.size`** (`int`, ≥ 1, ≤ 9; default `3`): how big &lt;really> \\* 2",
        '- **`choice.name`** (`str`; default `""`)',
        "Variant A.",
        "## named.NAME",
        "- **`named.NAME.value`** (`float`; required)",
        "## leaf",
        "- **`mode`** (one of `x`, `y`; default `y`)",
        '- **`weights`** (map of `str` to `float`; default `{"bm25": 0.5}`)',
    ):
        assert " ".join(expected.split()) in " ".join(page.split()), expected
    assert all(len(line) <= 120 for line in page.splitlines())


# -- README.md: a front door with the exact commands ---------------------------------------------------------------


def test_readme_is_small_and_has_the_exact_commands():
    raw = README.read_bytes()
    assert len(raw) <= 12288, f"README.md is {len(raw)} bytes; keep it <= 12288 (move detail to docs/)"
    quick = _section(raw.decode("utf-8"), "Quick start")
    blocks = [b.strip() for b in _bash_blocks(quick)]
    for command in (SETUP, MAIN_JOB, TESTS, FAST_LANE):
        assert command in blocks, f"README's quick start lacks the exact command block: {command}"


def test_ci_builds_the_docs_and_runs_the_readme_test_command():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert SETUP in lines and TESTS in lines
    docs_build = next(i for i, line in enumerate(lines) if ".venv/bin/mkdocs build --strict" in line)
    assert lines.index(SETUP) < docs_build < lines.index(TESTS)
    assert " -q" not in lines[docs_build]  # -q hides the warnings --strict counts (a broken anchor is one)


def test_every_quick_start_command_exists():
    quick = _section(README.read_text(encoding="utf-8"), "Quick start")
    commands = [argv for block in _bash_blocks(quick) for argv in _commands(block)]
    assert commands
    for argv in commands:
        if argv[0] == "bash":
            assert (ROOT / argv[1]).is_file(), f"no script {argv[1]}"
            continue
        assert argv[0] == ".venv/bin/python", f"unexpected program in the quick start: {argv[0]}"
        if argv[1] == "-m":
            assert importlib.util.find_spec(argv[2]), f"no module {argv[2]}"
            if "-m" in argv[3:]:  # a marker expression: its markers are registered
                markers = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
                expression = argv[argv.index("-m", 3) + 1]
                for marker in set(re.findall(r"\w+", expression)) - {"not", "and", "or"}:
                    assert f'"{marker}:' in markers, f"marker {marker!r} is not registered in pyproject.toml"
        else:
            assert argv[1] == "cli.py" and (ROOT / "cli.py").is_file()
            _parse_cli(argv[2:])
            if argv[2] == "ingest":
                for path in argv[3:]:
                    assert (ROOT / path).exists(), f"no such path {path}"


def test_every_readme_cli_command_parses():
    """The tour's commands name real commands and options (parsed, not run)."""
    commands = [argv for block in _bash_blocks(README.read_text(encoding="utf-8")) for argv in _commands(block)]
    cli_commands = [argv[2:] for argv in commands if argv[:2] == [".venv/bin/python", "cli.py"]]
    assert len(cli_commands) >= 10
    for argv in cli_commands:
        _parse_cli(argv)
        for i, arg in enumerate(argv[:-1]):
            if arg == "--config" and not argv[i + 1].endswith(".yaml"):
                assert (ROOT / "configs" / f"{argv[i + 1]}.yaml").is_file(), f"no shipped config {argv[i + 1]}"
            if arg in ("--config", "--configs", "--corpus") or arg.endswith((".yaml", ".jsonl")):
                target = argv[i + 1] if arg.startswith("--") else arg
                if "/" in target:
                    assert (ROOT / target).exists(), f"no such path {target}"


# -- the site ------------------------------------------------------------------------------------------------------


def test_nav_lists_every_page():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)\s*$", config, flags=re.M))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert "benchmarks.md" in nav
    assert pages <= nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert "gen_config_reference.py" in config  # excluded from the site


def test_doc_lines_fit():
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        if path.name == "benchmarks.md":  # written from bench/ results
            continue
        long = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > 120]
        assert not long, f"{path.relative_to(ROOT)}: lines longer than 120 characters: {long}"


_LIST_MARKER = r"(?:- |\* |\d+\. )"


def _lists_glued_to_a_paragraph(text: str) -> list[int]:
    """Line numbers of list items that directly follow a paragraph line, outside code fences: Python-Markdown (the
    site's renderer) needs a blank line there, or the items print as text beginning with '- '."""
    lines, glued, fenced = text.splitlines(), [], False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and i and re.match(_LIST_MARKER, line):
            previous = lines[i - 1]
            if previous.strip() and not re.match(rf"\s*{_LIST_MARKER}|\s+\S", previous):
                glued.append(i + 1)
    return glued


def test_lists_glued_to_a_paragraph_are_found():
    text = "Reading:\n- one\n- two\n\nText.\n\n- three\n  more of three\n- four\n```\nx\n- in a fence\n```\n"
    assert _lists_glued_to_a_paragraph(text) == [2]


def test_every_list_in_the_docs_renders_as_a_list():
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        glued = _lists_glued_to_a_paragraph(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT)
        assert not glued, f"{where}: list items right after a paragraph line (add a blank line before): {glued}"


def test_headings_carry_no_dates_or_issue_numbers():
    """Links point at headings; a heading that names when or for which issue it was written changes, and its links
    break. Dates and issue numbers belong in the text."""
    dated = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bissues? \d+")
    found = []
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        fenced = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            fenced ^= line.startswith("```")
            if not fenced and re.match(r"#{1,6} ", line) and dated.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line}")
    assert not found, "\n".join(found)
