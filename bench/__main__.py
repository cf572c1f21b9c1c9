"""The benchmarks as one suite.

    .venv/bin/python -m bench list                 # every maintained benchmark, what it measures, its result file
    .venv/bin/python -m bench run NAME [ARGS ...]  # run one (its own options after the name; --help for them)
    .venv/bin/python -m bench report [--check]     # write the generated tables (README, docs) from the results

`run` starts `python bench/SCRIPT ARGS` with this interpreter from the repository root; a benchmark that records
its result writes bench/results/<name>.json (bench/results.py). `report --check` changes nothing and exits 1 when a
generated table differs from its result file.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from registry import BENCHMARKS  # noqa: E402
from results import RESULTS, ROOT, render_blocks  # noqa: E402

DOCS = ROOT / "docs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("list", help="the maintained benchmarks")
    run = sub.add_parser("run", help="run one benchmark", add_help=False)
    run.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME")
    run.add_argument("args", nargs=argparse.REMAINDER)
    report = sub.add_parser("report", help="write the generated tables of README.md and docs/*.md")
    report.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is out of date")
    args = parser.parse_args(argv)
    if args.step == "list":
        width = max(map(len, BENCHMARKS))
        for name, b in BENCHMARKS.items():
            where = "".join(f"  -> {(RESULTS / f'{r}.json').relative_to(ROOT)}" for r in b.results)
            print(f"{name:<{width}}  {b.measures}{where}")
        return 0
    if args.step == "run":
        command = [sys.executable, str(BENCH / BENCHMARKS[args.name].script), *args.args]
        return subprocess.run(command, cwd=ROOT).returncode
    stale = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        rendered = render_blocks(text)
        if rendered != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(rendered, encoding="utf-8")
    if args.check:
        for page in stale:
            print(f"{page}: a generated table differs from its result file (python -m bench report)")
        print("every generated table in README.md and docs/ matches its result file" if not stale else "")
        return 1 if stale else 0
    print(f"generated tables written: {', '.join(map(str, stale)) or 'none changed'}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `python -m bench list | head` ends quietly, as Unix tools do
    sys.exit(main())
