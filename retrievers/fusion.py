"""Fusion of ranked lists from several retrievers, shared by every backend.

Each input is a ranked list of Passages (best first) under a retriever name. The output is one list, best first,
where every passage keeps its per-retriever scores (`scores[name]`) and 1-based ranks (`ranks[name]`), and gets
`scores["fused"]` / `score`.
"""
from __future__ import annotations

from copy import copy

from retrievers.documents import Passage


def _collect(ranked: dict[str, list[Passage]]) -> dict[str, Passage]:
    merged: dict[str, Passage] = {}
    for name, passages in ranked.items():
        for rank, p in enumerate(passages, start=1):
            m = merged.get(p.chunk_id)
            if m is None:
                m = merged[p.chunk_id] = copy(p)
                m.scores, m.ranks = dict(p.scores), dict(p.ranks)
            m.scores[name] = p.score
            m.ranks[name] = rank
    return merged


def _weights(ranked: dict[str, list[Passage]], weights: dict[str, float] | None) -> dict[str, float]:
    weights = weights or {}
    return {name: float(weights.get(name, 1.0)) for name in ranked}


def _finish(merged: dict[str, Passage], fused: dict[str, float]) -> list[Passage]:
    out = []
    for chunk_id, passage in merged.items():
        passage.score = fused[chunk_id]
        passage.scores["fused"] = passage.score
        out.append(passage)
    # ties are broken by chunk_id so the order never depends on dict iteration
    out.sort(key=lambda p: (-p.score, p.chunk_id))
    return out


def reciprocal_rank_fusion(ranked: dict[str, list[Passage]], k: float = 60.0,
                           weights: dict[str, float] | None = None) -> list[Passage]:
    """Weighted RRF: fused(d) = sum over retrievers r that returned d of  w_r / (k + rank_r(d)).

    Ranks are **1-based** (the best passage of a list has rank 1), as in Cormack et al. (2009); `k` is the
    smoothing constant (60 in that paper). A retriever missing from `weights` has weight 1.
    """
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    w = _weights(ranked, weights)
    merged = _collect(ranked)
    fused = {cid: sum(w[name] / (k + rank) for name, rank in p.ranks.items() if name in w)
             for cid, p in merged.items()}
    return _finish(merged, fused)


def min_max(scores: list[float]) -> list[float]:
    """Scale to [0, 1]; a list whose scores are all equal maps to 1.0 (every item is equally the best)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def convex_combination(ranked: dict[str, list[Passage]], weights: dict[str, float] | None = None) -> list[Passage]:
    """Normalised convex combination: fused(d) = sum_r w_r * minmax_r(d) / sum_r w_r.

    Each retriever's scores are min-max normalised over the list it returned; a passage a retriever did not
    return counts as 0 for it (below its worst returned passage).
    """
    w = _weights(ranked, weights)
    total = sum(w.values())
    if total <= 0:
        raise ValueError("at least one fusion weight must be > 0")
    merged = _collect(ranked)
    normalised: dict[str, dict[str, float]] = {}
    for name, passages in ranked.items():
        normalised[name] = dict(zip((p.chunk_id for p in passages), min_max([p.score for p in passages])))
    fused = {cid: sum(w[name] * normalised[name].get(cid, 0.0) for name in ranked) / total for cid in merged}
    return _finish(merged, fused)


def fuse(ranked: dict[str, list[Passage]], method: str = "convex", weights: dict[str, float] | None = None,
         rrf_k: float = 60.0) -> list[Passage]:
    if method == "rrf":
        return reciprocal_rank_fusion(ranked, k=rrf_k, weights=weights)
    if method == "convex":
        return convex_combination(ranked, weights=weights)
    raise ValueError(f"unknown fusion method {method!r} (rrf, convex)")
