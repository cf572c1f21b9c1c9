"""Ingestion throughput: chunks/s of a full `Ingestor.run` against raw embedding throughput of the same texts.

    python bench/ingest_throughput.py [--docs 1000]

Overhead = 1 - ingest_rate / embed_rate (target: <= 20%). Reads ../shared/datasets/scifact.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import ROOT, scifact_docs, write_resolved_config

from configs.loader import load_config
from retrievers.pipeline import RetrievalStack
from retrievers.store import search_text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "ingest"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("\n".join(json.dumps(d) for d in scifact_docs(args.docs)))
        config = load_config(None, [f"store.uri={tmp}/index"])
        write_resolved_config(config, Path(args.out))
        stack = RetrievalStack(config)
        stack.embedder.run(["warm-up"])

        t = time.perf_counter()
        report = stack.ingestor(progress=False).run([corpus])
        ingest_s = time.perf_counter() - t

        rows = stack.store.scan(["title", "text"]).to_pylist()
        texts = [search_text(r["title"], r["text"]) for r in rows]
        t = time.perf_counter()
        stack.embedder.run(texts)
        embed_s = time.perf_counter() - t

    n = report.chunks_written
    ingest_rate, embed_rate = n / ingest_s, n / embed_s
    print(f"documents: {report.added}, chunks: {n}")
    print(f"full ingest:    {ingest_s:7.1f} s  {ingest_rate:7.1f} chunks/s  (load, clean, chunk, embed, write, FTS index)")
    print(f"embedding only: {embed_s:7.1f} s  {embed_rate:7.1f} chunks/s")
    print(f"overhead: {100 * (1 - ingest_rate / embed_rate):.1f}% (target <= 20%)")


if __name__ == "__main__":
    main()
