"""Issue 12's near-miss check, end to end: questions whose answer is NOT indexed, asked through whole pipelines.

The calibration's near-miss set (bench/calibration/06_refusals.py): HotpotQA dev500 questions against the dev300_a
paragraphs only, a question dropped when one of its gold paragraphs is among them. This script writes that set as a
plain eval dataset (`--limit` questions) and its corpus; `cli.py eval` then asks it, and every answer that is not an
abstention is a wrong answer to an unanswerable question. The share abstained should be no lower after issue 12.

    .venv/bin/python bench/near_miss.py /tmp/near-miss --limit 100
    .venv/bin/python cli.py eval /tmp/near-miss/questions.jsonl --corpus /tmp/near-miss/corpus.jsonl --limit 100 \\
        --configs configs/fixed.yaml bench/fixed-before-issue12.yaml configs/no-llm.yaml \\
        bench/no-llm-before-issue12.yaml --out bench/eval/near-miss-hotpotqa100 --index-dir /tmp/eval-index

Writes OUT/questions.jsonl (id, question, answers, type, difficulty "near-miss") and OUT/corpus.jsonl (the 2,958
dev300_a paragraphs) and prints how many of each it wrote; it loads no model. `cli.py eval` writes the report.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import gold_titles, load_split, paragraphs  # the calibration's own definition of the set


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder for questions.jsonl and corpus.jsonl")
    ap.add_argument("--limit", type=int, default=100)
    args = ap.parse_args()
    indexed = paragraphs(load_split("a"))
    near = [r for r in load_split("b") if not gold_titles(r) & indexed.keys()]
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "questions.jsonl").open("w", encoding="utf-8") as f:
        for r in near[: args.limit]:
            f.write(
                json.dumps(
                    {
                        "id": r["id"],
                        "question": r["question"],
                        "answers": [r["answer"]],
                        "type": r.get("type", "-"),
                        "difficulty": "near-miss",
                    }
                )
                + "\n"
            )
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for title, text in indexed.items():
            f.write(json.dumps({"_id": title, "title": title, "text": text}) + "\n")
    print(
        f"{min(args.limit, len(near))} of {len(near)} near-miss questions and {len(indexed)} dev300_a paragraphs "
        f"written to {args.out}"
    )


if __name__ == "__main__":
    main()
