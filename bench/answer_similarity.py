"""Answer similarity (evaluation/research_metrics.py) over a finished evaluation's rows, beside F1 and EM: each
config's mean with its bootstrap 95% interval, and its paired difference from the baseline in similarity and F1.
Nothing is asked again; only the answers and gold answers are embedded (the packaged MiniLM).

    .venv/bin/python bench/answer_similarity.py bench/eval/compare-hotpotqa100 [--baseline fixed]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import common  # noqa: F401  (the repository root on sys.path)

from switchyard.evaluation.report import aggregate  # noqa: E402
from switchyard.evaluation.research_metrics import with_similarity  # noqa: E402
from switchyard.evaluation.rows import RESULTS, read_rows  # noqa: E402
from switchyard.retrievers.embedder import Embedder  # noqa: E402


def _diff(p: dict) -> str:
    return f"{p['diff']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] p={p['p']:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--baseline", default=None)
    args = parser.parse_args()
    rows = [r.rescored() for r in read_rows(args.folder / RESULTS)]
    embedder = Embedder("minilm")
    embedder.warm_up()
    start = time.perf_counter()
    rows = with_similarity(rows, embedder.run)
    print(f"{args.folder.name}: {len(rows)} rows, similarity in {time.perf_counter() - start:.1f} s")
    report = aggregate(rows, args.baseline)
    print(f"| config | F1 | EM | similarity [95% CI] | similarity − {report['baseline']} | F1 − {report['baseline']} |")
    print("|---|---|---|---|---|---|")
    for name, c in report["configs"].items():
        ci, paired = c["ci95"]["answer_similarity"], report["paired"].get(name)
        vs = f"{_diff(paired['answer_similarity'])} | {_diff(paired['f1'])}" if paired else "– | –"
        print(
            f"| {name} | {c['f1']['mean']:.3f} | {c['exact_match']['mean']:.3f} | "
            f"{ci['mean']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}] | {vs} |"
        )


if __name__ == "__main__":
    main()
