"""Natural-question sets for the retrieval suite (issue 75): questions people asked a search engine without seeing
the text, with their gold Wikipedia passages, packed compactly under bench/sets/ from their public sources.

    .venv/bin/python bench/natural_sets.py --nq-open nq-open-oracle.jsonl.gz \\
        --clapnq-answerable clapnq_dev_answerable.jsonl --clapnq-unanswerable clapnq_dev_unanswerable.jsonl

writes (each an xz-compressed JSONL, one record a line; provenance and licences in docs/question-sets.md):

- bench/sets/nq-open/questions.jsonl.xz: {question, answers, title, text}: the 2,655 NQ-open questions of "Lost in
  the Middle" (nelson-liu/lost-in-the-middle, qa_data/nq-open-oracle.jsonl.gz, MIT) with the one gold passage each
  (DPR's 100-word Wikipedia passages, 2018-12-20).
- bench/sets/clapnq-dev/questions.jsonl.xz: {id, question, title, text, answerable}: ClapNQ's dev split
  (primeqa/clapnq, annotated_data/dev/, Apache-2.0): 300 answerable Natural Questions with their gold passage, and
  the 300 unanswerable ones with the passage shown for them (it does not hold the answer: a hard negative).

bench/retrieval_suite.py turns them into BEIR folders (nq-open, clapnq). Nothing here downloads: the source files
are fetched from those repositories once, by whoever refreshes the packs (docs/question-sets.md says how).
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
from pathlib import Path

from common import ROOT

SETS = ROOT / "bench" / "sets"


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    path.write_bytes(lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))
    print(f"{path}: {len(records)} records, {path.stat().st_size:,} bytes")


def read_packed(path: Path) -> list[dict]:
    """The records of one packed set file."""
    return [json.loads(line) for line in lzma.decompress(path.read_bytes()).decode("utf-8").splitlines() if line]


def nq_open(source: Path) -> list[dict]:
    records = []
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            (gold,) = [c for c in rec["ctxs"] if c.get("isgold")]
            records.append(
                {"question": rec["question"], "answers": rec["answers"], "title": gold["title"], "text": gold["text"]}
            )
    return records


def clapnq(answerable: Path, unanswerable: Path) -> list[dict]:
    records = []
    for path, flag in ((answerable, True), (unanswerable, False)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                (passage,) = rec["passages"]
                records.append(
                    {
                        "id": rec["id"],
                        "question": rec["input"],
                        "title": passage["title"],
                        "text": passage["text"].strip(),
                        "answerable": flag,
                    }
                )
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nq-open", type=Path, help="nq-open-oracle.jsonl.gz")
    ap.add_argument("--clapnq-answerable", type=Path, help="clapnq_dev_answerable.jsonl")
    ap.add_argument("--clapnq-unanswerable", type=Path, help="clapnq_dev_unanswerable.jsonl")
    args = ap.parse_args()
    if args.nq_open:
        _write(SETS / "nq-open" / "questions.jsonl.xz", nq_open(args.nq_open))
    if args.clapnq_answerable and args.clapnq_unanswerable:
        _write(SETS / "clapnq-dev" / "questions.jsonl.xz", clapnq(args.clapnq_answerable, args.clapnq_unanswerable))


if __name__ == "__main__":
    main()
