"""Issue 11 goal 1: sentence windows (dense retrieval scores a chunk by its best window) against one vector per chunk.

    .venv/bin/python bench/retrieval_suite.py
    # one vector per chunk (the runs as they were before windows), then the default (windows on):
    .venv/bin/python bench/fusion_tuning.py cache --set ingest.window_tokens=0 --runs runs-chunk-vectors
    .venv/bin/python bench/fusion_tuning.py cache
    .venv/bin/python bench/fusion_tuning.py tune --family "convex max" --family "convex zscore" \\
        --family "convex minmax" --family rrf                                # the fusion settings, on dev
    .venv/bin/python bench/windows.py --split dev && .venv/bin/python bench/windows.py --split test
    .venv/bin/python bench/windows.py --latency scifact   # query latency, windows vs chunk vectors, same data

Prints a Markdown table, one row per dataset of the split (default test): nDCG@10 (or --metric) of BM25, dense over
chunk vectors, dense over windows, the previous default (BM25 + chunk vectors, `max` 0.5 / 0.5) and the default
(BM25 + windows, the shipped fusion), with paired randomization p-values of the default against the previous
default and against the better single retriever. With --latency: p50 / p95 ms of dense and hybrid queries, windows
on and off. Reads the cached runs of bench/fusion_tuning.py (bench/out/retrieval-suite/runs*/); writes nothing.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np
from fusion_tuning import SUITE, paired_p, per_query

from switchyard.configs.loader import load_config
from switchyard.configs.schema import FusionConfig
from switchyard.evaluation.ranking import METRIC_NAMES, percentile
from switchyard.evaluation.retrieval import load_beir, prepare_stack
from switchyard.run_context import ALL

NAMES = ("scifact", "hotpotqa", "hotpot-single", "phantomwiki")
PREVIOUS = dict(normalization="max", adaptive_power=0, weights={"bm25": 0.5, "dense": 0.5})


def load_runs(folder: Path, name: str) -> dict | None:
    path = folder / f"{name}.pkl"
    return pickle.loads(path.read_bytes()) if path.exists() else None


def latency(suite: Path, name: str, split: str) -> None:
    """p50 / p95 ms of dense and hybrid queries (no reranking) through the stack, windows on and off; the
    collections are the ones `fusion_tuning.py cache` built (found unchanged, not re-ingested)."""
    import time

    corpus, queries, _ = load_beir(suite / name, split)
    for label, overrides in (("chunk vectors", ["ingest.window_tokens=0"]), ("windows", [])):
        stack, _ = prepare_stack(load_config(None, overrides), corpus, str(suite / "index"))
        dense, hybrid = stack.dense(), stack.retriever
        stack.embedder.run(["warm-up"])
        times: dict[str, list[float]] = {"dense": [], "hybrid": []}
        for text in queries.values():
            for kind, run in (("dense", dense.run), ("hybrid", hybrid.run)):
                t = time.perf_counter()
                run(text)
                times[kind].append((time.perf_counter() - t) * 1e3)
        cells = ", ".join(f"{k} p50 {percentile(v, 50):.1f} / p95 {percentile(v, 95):.1f} ms" for k, v in times.items())
        print(f"{name} {split} ({len(queries)} queries, {stack.store.count(ALL)} chunks), {label}: {cells}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--chunk-runs", default="runs-chunk-vectors", help="runs folder of the chunk-vector collections")
    ap.add_argument("--split", default="test", choices=["dev", "test"])
    ap.add_argument("--metric", default="ndcg@10", choices=METRIC_NAMES)
    ap.add_argument("--latency", metavar="DATASET", choices=NAMES, help="time queries instead of scoring")
    args = ap.parse_args()
    suite = Path(args.suite)
    if args.latency:
        latency(suite, args.latency, args.split)
        return 0
    default = FusionConfig().model_dump()
    print(
        f"{args.split} {args.metric}; default fusion: {default['normalization']} {default['weights']}; "
        "p: paired randomization, 10,000 sign flips"
    )
    print(
        "| dataset | bm25 | dense (chunk vectors) | dense (windows) | previous default | default | "
        "default - previous (p) | default - better single (p) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in NAMES:
        new, old = load_runs(suite / "runs", name), load_runs(suite / args.chunk_runs, name)
        if new is None or old is None:
            print(f"{name}: runs missing (see the commands above)", file=sys.stderr)
            continue
        bm25 = per_query(new, args.split, "bm25", args.metric)
        dense_chunks = per_query(old, args.split, "dense", args.metric)
        dense_windows = per_query(new, args.split, "dense", args.metric)
        previous = per_query(old, args.split, PREVIOUS, args.metric)
        now = per_query(new, args.split, default, args.metric)
        best = max((bm25, dense_windows), key=np.mean)
        print(
            f"| {name} | {bm25.mean():.4f} | {dense_chunks.mean():.4f} | {dense_windows.mean():.4f} | "
            f"{previous.mean():.4f} | {now.mean():.4f} | {(now - previous).mean():+.4f} "
            f"({paired_p(now - previous):.3f}) | {(now - best).mean():+.4f} ({paired_p(now - best):.3f}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
