"""Search latency (no reranking) at 10k and 100k chunks: a quick probe (bench/scale.py is the full one).

    .venv/bin/python bench/query_latency.py [--sizes 10000 100000] [--queries 200] [--base-docs 1500]

Real SciFact chunks (of --base-docs abstracts) are embedded once; larger collections are built from them by adding
small Gaussian noise to the vectors and a variant tag to the texts, so the index has the size and term statistics
of a real collection without hours of embedding. Times `RetrievalStack.search(..., rerank=False)` per retrieval mode
(bm25, dense, hybrid) over --queries SciFact claims, each embedded afresh. Target: hybrid p50 <= 50 ms.

Prints one line per size with p50 / p95 ms per mode. Writes the resolved config to --out (default
bench/out/latency/config.resolved.yaml); the collections live in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ROOT, copied_chunk, scifact_docs, scifact_queries, write_resolved_config

from switchyard.configs.loader import load_config
from switchyard.evaluation.ranking import percentile
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import ALL


def build(stack: RetrievalStack, base: list[dict], base_vecs: np.ndarray, size: int, rng) -> float:
    t = time.perf_counter()
    batch, ids, vecs = [], [], []
    for i in range(size):
        src = base[i % len(base)]
        copy = i // len(base)
        doc_id = f"{src['doc_id']}~{copy}"
        text = src["text"] if copy == 0 else f"{src['text']} variant{copy}"
        batch.append(copied_chunk(src, doc_id, text, "x"))
        v = base_vecs[i % len(base)] + (rng.normal(0, 0.02, base_vecs.shape[1]) if copy else 0)
        vecs.append(v / np.linalg.norm(v))
        ids.append(doc_id)
        if len(batch) == 10_000 or i == size - 1:
            stack.store.write_documents(sorted(set(ids)), batch, np.asarray(vecs, dtype=np.float32))
            batch, ids, vecs = [], [], []
    stack.store.refresh_indexes()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--base-docs", type=int, default=1500)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "latency"))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    all_queries = scifact_queries()
    queries, warmup = all_queries[: args.queries], all_queries[-5:]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("\n".join(json.dumps(d) for d in scifact_docs(args.base_docs)))
        seed = RetrievalStack(load_config(None, [f"store.uri={tmp}/seed"]))
        seed.ingestor(progress=False).run([corpus])
        base = seed.store.scan(["doc_id", "source", "title", "text", "chunk_index", "vector"], scope=ALL).to_pylist()
        base_vecs = np.asarray([r.pop("vector") for r in base], dtype=np.float32)
        print(f"seed: {len(base)} real chunks from {args.base_docs} SciFact abstracts")
        for size in args.sizes:
            config = load_config(None, [f"store.uri={tmp}/n{size}"])
            write_resolved_config(config, Path(args.out))
            build_s = build(RetrievalStack(config, embedder=seed.embedder), base, base_vecs, size, rng)
            for mode in ("bm25", "dense", "hybrid"):
                stack = RetrievalStack(
                    load_config(None, [f"store.uri={tmp}/n{size}", f"retrieve.mode={mode}"]), embedder=seed.embedder
                )
                for q in warmup:
                    stack.search(q, rerank=False, groups=ALL)  # warm the index caches
                stack.embedder.clear_cache()  # every timed query pays for its own embedding
                times = []
                for q in queries:
                    t = time.perf_counter()
                    stack.search(q, rerank=False, groups=ALL)
                    times.append((time.perf_counter() - t) * 1e3)
                results[(size, mode)] = (percentile(times, 50), percentile(times, 95))
            print(
                f"{size:>7} chunks (built in {build_s:.0f}s): "
                + ", ".join(
                    f"{m} p50 {results[(size, m)][0]:.1f} ms / p95 {results[(size, m)][1]:.1f} ms"
                    for m in ("bm25", "dense", "hybrid")
                )
            )
    print("target: hybrid p50 <= 50 ms (excluding reranking)")


if __name__ == "__main__":
    main()
