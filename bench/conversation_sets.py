"""MTRAG's conversations split for tuning and reporting: writes `dev.jsonl` and `test.jsonl` in the plain JSONL form
`cli.py eval` reads (docs/evaluation.md, "Conversations"), each turn with the dataset's own earlier turns.

    .venv/bin/python bench/conversation_sets.py bench/out/mtrag          # then, e.g.:
    .venv/bin/python cli.py eval bench/out/mtrag/dev.jsonl --corpus ../shared/datasets/mtrag-clapnq-fiqa/passages.jsonl \\
        --configs bench/conversation/last.yaml bench/conversation/terms.yaml bench/conversation/rewrite.yaml \\
        --baseline last --out bench/out/conv-dev

Split (by conversation, never by turn): within each domain the conversations are sorted by the hex sha1 of their id
(the part of `task_id` before `<::>`); the first ceil(n/2) are `dev`, the rest `test` (clapnq 15 / 14, fiqa 14 / 13
conversations). Tune on dev; score test once. bench/conversation_retrieval.py uses the same rule (`split_of`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

from common import SHARED

from switchyard.evaluation.datasets import load_dataset

MTRAG = SHARED / "mtrag-clapnq-fiqa"


def conversation_id(task_id: str) -> str:
    return task_id.split("<::>")[0]


def split_of(turns: list[dict]) -> dict[str, str]:
    """conversation id -> dev | test, from MTRAG turn records (`task_id`, `domain`)."""
    by_domain: dict[str, set[str]] = {}
    for t in turns:
        by_domain.setdefault(t["domain"], set()).add(conversation_id(t["task_id"]))
    split: dict[str, str] = {}
    for ids in by_domain.values():
        ranked = sorted(ids, key=lambda c: hashlib.sha1(c.encode()).hexdigest())
        half = math.ceil(len(ranked) / 2)
        split.update({c: ("dev" if i < half else "test") for i, c in enumerate(ranked)})
    return split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for dev.jsonl and test.jsonl")
    args = ap.parse_args()
    turns = [json.loads(line) for line in (MTRAG / "turns.jsonl").read_text().splitlines() if line.strip()]
    split = split_of(turns)
    dataset = load_dataset(MTRAG)
    args.out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for part in ("dev", "test"):
        rows = [
            {
                "id": q.id,
                "question": q.question,
                "answers": q.answers,
                "history": q.history,
                "turn": q.turn,
                "kind": q.difficulty,
                "rewrite": q.rewrite,
                "gold_doc_ids": q.gold_doc_ids,
                "type": q.type,
            }
            for q in dataset.questions
            if split[conversation_id(q.id)] == part
        ]
        (args.out / f"{part}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        counts[part] = len(rows)
    print(f"wrote {args.out}/dev.jsonl ({counts['dev']} turns) and test.jsonl ({counts['test']} turns)")


if __name__ == "__main__":
    main()
