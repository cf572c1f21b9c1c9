"""Step 1: index each split's context paragraphs and cache the default top-5 hybrid retrieval for every question.

Collections: hotpot_a (union of dev300_a paragraphs), hotpot_b (union of dev500 paragraphs).
Runs cached in CACHE/runs_{index}_{questions}.json, one entry per question:
  {id, question, gold: [titles], passages: [{chunk_id, title, rank}], cos: [cosine(question, stored vector)]}
Four runs: a_a, b_a (answerable / unanswerable against index a), b_b, a_b (answerable / unanswerable against b).

    .venv/bin/python bench/calibration/01_retrieve.py

Prints the ingest summary per index and one line per run written (questions, skipped, seconds).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py
from common import CALIBRATION_CACHE as CACHE  # noqa: E402
from common import gold_titles, load_split, make_stack, paragraphs, torch_threads  # noqa: E402


def build_index(name: str, records: list[dict], embedder):
    stack = make_stack(f"hotpot_{name}", embedder)
    corpus = CACHE / f"corpus_{name}.jsonl"
    if not corpus.exists():
        with open(corpus, "w") as f:
            for title, text in paragraphs(records).items():
                f.write(json.dumps({"_id": title, "title": title, "text": text}) + "\n")
    t = time.perf_counter()
    report = stack.ingestor(progress=False).run([corpus])
    print(f"index {name}: {report.summary()} ({time.perf_counter() - t:.0f}s)", flush=True)
    return stack


def run(stack, records: list[dict], out_name: str, exclude_titles: set[str] | None = None) -> None:
    from switchyard.retrievers.store import ChunkFetch
    from switchyard.run_context import ALL

    out = CACHE / f"runs_{out_name}.json"
    if out.exists():
        print(f"{out.name}: cached")
        return
    rows = []
    skipped = 0
    t = time.perf_counter()
    for r in records:
        gold = gold_titles(r)
        if exclude_titles is not None and gold & exclude_titles:
            skipped += 1  # an 'unanswerable' question whose gold paragraph happens to be indexed
            continue
        res = stack.search(r["question"], groups=ALL)
        ps = res.passages
        vecs = ChunkFetch(stack.store).vectors([p.chunk_id for p in ps])
        q = stack.embedder.embed_query(r["question"])
        cos = [float(vecs[p.chunk_id] @ q) for p in ps]
        rows.append(
            {
                "id": r["id"],
                "type": r["type"],
                "question": r["question"],
                "answer": r["answer"],
                "gold": sorted(gold),
                "passages": [{"chunk_id": p.chunk_id, "title": p.title} for p in ps],
                "cos": cos,
            }
        )
    out.write_text(json.dumps(rows))
    print(
        f"{out.name}: {len(rows)} questions, {skipped} skipped (gold indexed), {time.perf_counter() - t:.0f}s",
        flush=True,
    )


def main() -> None:
    torch_threads()
    CACHE.mkdir(parents=True, exist_ok=True)
    from switchyard.retrievers.embedder import Embedder

    embedder = Embedder("minilm")
    recs = {s: load_split(s) for s in ("a", "b")}
    titles = {s: set(paragraphs(recs[s])) for s in recs}
    for idx in ("a", "b"):
        other = "b" if idx == "a" else "a"
        stack = build_index(idx, recs[idx], embedder)
        run(stack, recs[idx], f"{idx}_{idx}")  # answerable
        run(stack, recs[other], f"{other}_{idx}", exclude_titles=titles[idx])  # unanswerable


if __name__ == "__main__":
    main()
