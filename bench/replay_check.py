"""Compare a replayed run's rows with the recorded ones: how many are identical apart from what depends on timing,
on where the checkout lives, or on how a reply was obtained.

    .venv/bin/python bench/replay_check.py bench/eval/abstention-phantomwiki-s3 /tmp/replay-s3

Reads each folder's rows (`questions.jsonl`, packed `questions.jsonl.xz` first: evaluation/jsonl.py), keyed by
(config, run, question). Left out of the comparison: timings (`ms`, `*_ms`), run and trace ids, the cache
counters (`cached_calls`) and document source paths (a checkout's absolute path). Prints one line per config
(identical / compared) and the first differing fields; exits 1 when a row differs or is missing from the replay.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import common  # noqa: F401  (the repository root on sys.path)

from switchyard.evaluation.jsonl import read_results  # noqa: E402
from switchyard.evaluation.rows import RESULTS  # noqa: E402

IGNORED = {"ms", "run_id", "trace_id", "cached_calls", "source", "path"}


def comparable(value):
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in IGNORED and not k.endswith("_ms")}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def first_difference(a, b, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            if a.get(key) != b.get(key):
                return first_difference(a.get(key), b.get(key), f"{where}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{where}[{i}]")
    return f"{where or '.'}: {str(a)[:80]!r} vs {str(b)[:80]!r}"


def rows_by_key(run: Path) -> dict[tuple, dict]:
    return {(r["config"], r["run"], r["id"]): comparable(r) for r in read_results(run / RESULTS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recorded", type=Path)
    parser.add_argument("replayed", type=Path)
    args = parser.parse_args(argv)
    recorded, replayed = rows_by_key(args.recorded), rows_by_key(args.replayed)
    if not recorded:
        print(f"replay_check: {args.recorded} holds no rows", file=sys.stderr)
        return 1
    same, total = Counter(), Counter()
    differences = []
    for key, row in recorded.items():
        total[key[0]] += 1
        other = replayed.get(key)
        if other == row:
            same[key[0]] += 1
        elif len(differences) < 5:
            differences.append(f"  {key}: " + ("not replayed" if other is None else first_difference(row, other)))
    for config in total:
        print(f"{config}: {same[config]}/{total[config]} rows identical")
    print("\n".join(differences))
    return 0 if sum(same.values()) == len(recorded) else 1


if __name__ == "__main__":
    sys.exit(main())
