"""Issue 12's near-miss check, end to end: questions whose answer is NOT indexed, asked through whole pipelines.

The calibration's near-miss set (bench/calibration/06_refusals.py): HotpotQA dev500 questions against the dev300_a
paragraphs only, a question dropped when one of its gold paragraphs is among them. This script writes that set as a
plain eval dataset (`--limit` questions) and its corpus; `cli.py eval` then asks it, and every answer that is not an
abstention is a wrong answer to an unanswerable question. The share abstained should be no lower after issue 12.

    .venv/bin/python bench/near_miss.py /tmp/near-miss --limit 100
    .venv/bin/python cli.py eval /tmp/near-miss/questions.jsonl --corpus /tmp/near-miss/corpus.jsonl --limit 100 \\
        --configs configs/fixed.yaml bench/fixed-before-issue12.yaml configs/no-llm.yaml \\
        bench/no-llm-before-issue12.yaml --out bench/eval/near-miss-hotpotqa100 --index-dir /tmp/eval-index
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import SHARED

HOTPOTQA = SHARED / "hotpotqa_dev_distractor_sample"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder for questions.jsonl and corpus.jsonl")
    ap.add_argument("--limit", type=int, default=100)
    args = ap.parse_args()
    indexed: dict[str, str] = {}
    for r in read_jsonl(HOTPOTQA / "dev300_a.jsonl"):
        for title, sentences in zip(r["context"]["title"], r["context"]["sentences"]):
            indexed.setdefault(title, "".join(sentences).strip())
    near = [r for r in read_jsonl(HOTPOTQA / "dev500.jsonl") if not set(r["supporting_facts"]["title"]) & set(indexed)]
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "questions.jsonl").open("w", encoding="utf-8") as f:
        for r in near[: args.limit]:
            f.write(json.dumps({"id": r["id"], "question": r["question"], "answers": [r["answer"]],
                                "type": r.get("type", "-"), "difficulty": "near-miss"}) + "\n")
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for title, text in indexed.items():
            f.write(json.dumps({"_id": title, "title": title, "text": text}) + "\n")
    print(f"{min(args.limit, len(near))} of {len(near)} near-miss questions and {len(indexed)} dev300_a paragraphs "
          f"written to {args.out}")


if __name__ == "__main__":
    main()
