"""One result file per benchmark run, in one schema, and the docs tables generated from them.

A benchmark that finishes calls `record(name, figures, config)`: bench/results/<name>.json then holds

    {"schema": 1, "benchmark": name, "figures": {...}, "command": [...], "commit": {"sha", "dirty"},
     "machine": {"cpu", "cores", "memory_gib", "python", "platform"}, "config_hash": sha256 or null,
     "config": {...} or null, "finished": ISO time}

`figures` is the benchmark's own nested mapping of names to numbers or strings; `config` what it ran with (its
options, a resolved pipeline config), hashed so two results say whether they measured the same thing. A new run of a
benchmark replaces its file (git keeps the old ones); variants of one benchmark are keys inside `figures`.

docs/benchmarks.md carries tables generated from these files between markers:

    <!-- result: NAME TABLE -->
    | ... the generated table ... |
    <!-- end result -->

TABLE names a function of bench/tables.py that renders that table from the result's figures. `python -m bench report`
writes every such block again from the committed results; tests/bench/test_results.py fails when a block differs
from what its result file renders (a figure edited by hand, or a result committed without the docs).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SCHEMA = 1
BLOCK = re.compile(r"(<!-- result: (?P<name>[\w./-]+) (?P<table>\w+) -->\n)(?P<body>.*?)(<!-- end result -->)", re.S)


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in _read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def commit() -> dict:
    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        except OSError:  # no git on PATH
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    return {
        "sha": git("rev-parse", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def config_hash(config: dict | None) -> str | None:
    if config is None:
        return None
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def record(
    name: str, figures: dict, config: dict | None = None, folder: Path = RESULTS, path: Path | None = None
) -> Path:
    """Write bench/results/<name>.json (or `path`, for a result kept beside a run's other outputs) for a finished run,
    replacing the previous one, and return its path."""
    result = {
        "schema": SCHEMA,
        "benchmark": name,
        "figures": figures,
        "command": [Path(sys.argv[0]).name if sys.argv else "", *sys.argv[1:]],
        "commit": commit(),
        "machine": machine(),
        "config_hash": config_hash(config),
        "config": config,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = path or folder / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, sort_keys=False, default=str) + "\n")
    return path


def result_path(name: str, folder: Path = RESULTS) -> Path:
    """A block's NAME: a benchmark's result (bench/results/NAME.json), or a path from the repository root without
    `.json` for a result kept beside a run's outputs (bench/eval/retrieval-selection/test-chosen)."""
    return ROOT / f"{name}.json" if "/" in name else folder / f"{name}.json"


def load(name: str, folder: Path = RESULTS) -> dict:
    path = result_path(name, folder)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no result for benchmark {name!r} (run it: python -m bench run {name})")
    result = json.loads(path.read_text())
    if result.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {result.get('schema')!r}, expected {SCHEMA}")
    return result


def render_blocks(text: str, folder: Path = RESULTS) -> str:
    """`text` with every result block's body rendered again from its result file."""
    import tables

    def body(match: re.Match) -> str:
        render = getattr(tables, match["table"], None)
        if render is None:
            raise ValueError(f"bench/tables.py has no table {match['table']!r} (block for {match['name']})")
        rendered = render(load(match["name"], folder)).rstrip("\n") + "\n"
        return match.group(1) + rendered + match.group(5)

    return BLOCK.sub(body, text)


CITED = re.compile(r"bench/(?:results|eval)/[\w./-]*\w")


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of a Markdown page, split at every heading outside code fences."""
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"#{1,6} ", line):
            out.append((line.lstrip("#").strip(), []))
        else:
            out[-1][1].append(line)
    return [(heading, "\n".join(body)) for heading, body in out]


def backed(body: str) -> bool:
    """Whether a section's figures have a result behind them: a generated block, or a cited committed result, i.e. a
    file in this schema or a run folder of `switchyard eval` (its report.json and manifest.json: commit, host,
    configs)."""
    if BLOCK.search(body):
        return True
    for cited in CITED.findall(body):
        path = ROOT / cited
        if path.is_dir() and (path / "report.json").is_file() and (path / "manifest.json").is_file():
            return True
        if path.suffix == ".json" and path.is_file():
            try:
                if json.loads(path.read_text()).get("schema") == SCHEMA:
                    return True
            except (ValueError, AttributeError):
                continue
    return False


def unbacked(text: str) -> list[str]:
    """The headings of the sections that quote a table of figures with no result behind it (`backed`)."""
    return [h for h, body in sections(text) if re.search(r"^\|[-|: ]+\|$", body, re.M) and not backed(body)]
