"""Issue 12's reading of an eval folder: per config, EM / F1 / contains on what the user reads first, how often a
short answer was shown, whether every shown short answer occurs in a cited passage (re-checked here from the rows,
not taken from the pipeline's word), abstention, words per answer and latency.

    .venv/bin/python bench/short_answers.py bench/eval/short-answers-hotpotqa100 \\
        --naive bench/eval/short-answers-hotpotqa100/naive_rag.jsonl
    .venv/bin/python bench/short_answers.py bench/eval/short-answers-phantomwiki-s11

Reads EVAL_DIR/questions.jsonl (or its packed questions.jsonl.xz: the rows `cli.py eval` wrote) and, with --naive, the rows of bench/naive_rag.py;
prints one Markdown table row per config (and one for the naive baseline first). Writes nothing, loads no model.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import common  # noqa: F401  (the repository root on sys.path)

from switchyard.evaluation.jsonl import read_results  # noqa: E402
from switchyard.evaluation.rows import RESULTS  # noqa: E402
from switchyard.nodes.short_answer import occurs_in, split_list  # noqa: E402


def grounded(row: dict) -> bool:
    """A yes/no answer needs cited evidence; any other short answer (each item of a list) must occur in a cited
    passage."""
    cited = " ".join(f"{c['title']}. {c['text']}" for c in row.get("citations", []))
    if row["prediction"] in ("yes", "no"):
        return bool(row.get("citations"))
    return all(occurs_in(item, cited) for item in split_list(row["prediction"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir")
    ap.add_argument("--naive", help="bench/naive_rag.py rows, shown as a first line")
    args = ap.parse_args()
    rows = read_results(Path(args.eval_dir) / RESULTS)  # packed (questions.jsonl.xz) or not
    by_config = defaultdict(list)
    for r in rows:
        if not r.get("error"):
            by_config[r["config"]].append(r)
    print("| pipeline | n | EM | F1 | contains | short shown | shown grounded | abstained | words | p50 s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    if args.naive:
        naive = [json.loads(x) for x in Path(args.naive).read_text().splitlines() if x.strip()]
        m = lambda k: statistics.fmean(r[k] for r in naive)
        print(
            f"| naive RAG (BM25 top-5, one prompt) | {len(naive)} | {m('exact_match'):.3f} | {m('f1'):.3f} | "
            f"{m('contains'):.3f} | – | – | – | {statistics.fmean(len(r['prediction'].split()) for r in naive):.1f}"
            f" | {statistics.median(r['latency_ms'] for r in naive) / 1e3:.1f} |"
        )
    for name, rs in by_config.items():
        shown = [r for r in rs if r.get("grounding", {}).get("shown") == "short_answer"]
        m = lambda k: statistics.fmean(r[k] for r in rs)  # noqa: B023
        ok = sum(grounded(r) for r in shown)
        words = statistics.fmean(len(r["prediction"].split()) for r in rs if not r["abstained"]) if rs else 0
        print(
            f"| {name} | {len(rs)} | {m('exact_match'):.3f} | {m('f1'):.3f} | {m('contains'):.3f} | "
            f"{len(shown) / len(rs):.2f} | {ok}/{len(shown)} | {statistics.fmean(r['abstained'] for r in rs):.2f} | "
            f"{words:.1f} | {statistics.median(r['latency_ms'] for r in rs) / 1e3:.1f} |"
        )


if __name__ == "__main__":
    main()
