"""Generates PhantomWiki instances shaped like ../shared/datasets/phantomwiki-s11 but from other seeds, so that
abstention and answer defaults are tuned on instances other than the one they are reported on (issue 23, goal 3).

    .venv/bin/python bench/phantomwiki_instances.py bench/out/phantomwiki --seeds 1 2 3 4

The generator is the authors' own package, `phantom-wiki` 1.0.3 from PyPI, run with s11's parameters (8 family
trees of at most 25 people, question depth 6, 10 questions per template: 8 templates, 80 questions, ~200 articles);
seed 11 reproduces the shared s11 folder (articles, questions and answers; the question ids are random). It needs
SWI-Prolog (`apt-get install swi-prolog-nox`) and declares Python >= 3.12, although it runs on the project's 3.11:
it is installed into its own virtual environment (OUT/.venv, made once) with `--ignore-requires-python` and
binary-only dependencies, never into the project's.
Writes OUT/s<seed>/{articles,questions}.json, a folder `cli.py eval` reads as a PhantomWiki dataset. Seeds 1 and 2
are the development instances of docs/benchmarks.md, 3 and 4 the held-out ones.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

GENERATOR = "phantom-wiki==1.0.3"
GENERATOR_DEPENDENCIES = [
    "networkx",
    "nltk",
    "numpy<2.3",
    "pandas<2.3",
    "pyswip",
    "tabulate",
    "termcolor",
    "tqdm",
    "pydot",
    "matplotlib<3.11",
]
S11_PARAMETERS = [
    "--num-family-trees",
    "8",
    "--max-family-tree-size",
    "25",
    "--num-questions-per-type",
    "10",
    "--question-depth",
    "6",
    "--article-format",
    "json",
    "--question-format",
    "json",
    "--quiet",
]


def generator_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run(pip + ["--only-binary=:all:", *GENERATOR_DEPENDENCIES], check=True)
    subprocess.run(pip + ["--no-deps", "--ignore-requires-python", GENERATOR], check=True)
    return python


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    args = ap.parse_args()
    if shutil.which("swipl") is None:
        sys.exit("error: SWI-Prolog is missing (apt-get install swi-prolog-nox)")
    python = generator_python(args.out / ".venv")
    for seed in args.seeds:
        folder = args.out / f"s{seed}"
        subprocess.run(
            [str(python), "-m", "phantom_wiki", "-od", str(folder), "--seed", str(seed), *S11_PARAMETERS],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for extra in ("facts.pl", "timings.csv"):
            (folder / extra).unlink(missing_ok=True)
        print(folder)


if __name__ == "__main__":
    main()
