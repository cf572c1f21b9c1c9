"""Shared helpers for the SciFact fusion/rerank research (read-only use of the project; caches in /tmp/research).

Run from the repo root:  HF_HUB_OFFLINE=1 .venv/bin/python bench/research/<script>.py
"""
from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = Path("/work/shared/datasets/scifact")
CACHE = Path(os.environ.get("RESEARCH_CACHE", "/tmp/research"))
INDEX_URI = os.environ.get("RESEARCH_INDEX", "/tmp/research/idx")  # a copy of /tmp/evalcache
COLLECTION = "beir-032d12e21537"
DEPTH = 200  # chunks per retriever in the cached runs
EVAL_DEPTH = 100

from retrievers.metrics import dedupe, ndcg_at_k, recall_at_k  # noqa: E402


def load_qrels(split: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with (DATA / "qrels" / f"{split}.tsv").open() as fh:
        for i, row in enumerate(csv.reader(fh, delimiter="\t")):
            if i == 0:
                continue
            out.setdefault(row[0], {})[row[1]] = float(row[2])
    return out


def load_queries() -> dict[str, str]:
    out = {}
    with (DATA / "queries.jsonl").open() as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                out[str(r["_id"])] = r["text"]
    return out


def load_corpus() -> dict[str, dict]:
    out = {}
    with (DATA / "corpus.jsonl").open() as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                out[str(r["_id"])] = r
    return out


def splits():
    return {"train": load_qrels("train"), "test": load_qrels("test")}


def load_runs():
    """{'bm25': {qid: [(chunk_id, score), ...]}, 'dense': {...}} top-200 chunks, plus chunk meta."""
    runs = json.loads((CACHE / "runs.json").read_text())
    meta = json.loads((CACHE / "chunks_meta.json").read_text())
    return runs, meta


def score_rankings(rankings: dict[str, list[str]], qrels: dict[str, dict[str, float]]) -> dict[str, float]:
    """rankings: qid -> doc-id ranking (deduped here). Returns mean nDCG@10, Recall@100."""
    nd, rc = [], []
    for qid, rel in qrels.items():
        r = dedupe(rankings.get(qid, []))[:EVAL_DEPTH]
        nd.append(ndcg_at_k(r, rel, 10))
        rc.append(recall_at_k(r, rel, 100))
    return {"ndcg@10": float(np.mean(nd)), "recall@100": float(np.mean(rc))}


def per_query_ndcg(rankings, qrels):
    return np.array([ndcg_at_k(dedupe(rankings.get(q, []))[:EVAL_DEPTH], rel, 10) for q, rel in qrels.items()])


def minmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    lo, hi = x.min(), x.max()
    return np.ones_like(x) if hi == lo else (x - lo) / (hi - lo)


def fuse_lists(lists: dict[str, list[tuple[str, float]]], method: str, weights: dict[str, float],
               rrf_k: float = 60.0, depth: dict[str, int] | None = None) -> list[tuple[str, float]]:
    """Same maths as retrievers.fusion.fuse on (chunk_id, score) lists; returns [(chunk_id, fused)] best first."""
    fused: dict[str, float] = {}
    total = sum(weights.get(n, 1.0) for n in lists)
    for name, lst in lists.items():
        if depth and name in depth:
            lst = lst[: depth[name]]
        w = weights.get(name, 1.0)
        if not lst:
            continue
        if method == "rrf":
            for rank, (cid, _) in enumerate(lst, start=1):
                fused[cid] = fused.get(cid, 0.0) + w / (rrf_k + rank)
        else:
            norm = minmax(np.array([s for _, s in lst]))
            for (cid, _), s in zip(lst, norm):
                fused[cid] = fused.get(cid, 0.0) + w * s / total
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
