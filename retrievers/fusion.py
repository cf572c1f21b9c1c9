"""Fusion of ranked lists from several retrievers, shared by every backend.

Each input is a ranked list of Passages (best first) under a retriever name. The output is one list, best first,
where every passage keeps its per-retriever scores (`scores[name]`) and 1-based ranks (`ranks[name]`), and gets
`scores["fused"]` / `score`.
"""

from __future__ import annotations

import math
from copy import copy

from switchyard.configs.schema import AdaptiveSignal, FusionMethod, Normalization
from switchyard.retrievers.documents import Passage


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


def reciprocal_rank_fusion(
    ranked: dict[str, list[Passage]], k: float = 60.0, weights: dict[str, float] | None = None
) -> list[Passage]:
    """Weighted RRF: fused(d) = sum over retrievers r that returned d of  w_r / (k + rank_r(d)).

    Ranks are **1-based** (the best passage of a list has rank 1), as in Cormack et al. (2009); `k` is the
    smoothing constant (60 in that paper). A retriever missing from `weights` has weight 1.
    """
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    w = _weights(ranked, weights)
    merged = _collect(ranked)
    fused = {cid: sum(w[name] / (k + rank) for name, rank in p.ranks.items() if name in w) for cid, p in merged.items()}
    return _finish(merged, fused)


def min_max(scores: list[float]) -> list[float]:
    """Scale to [0, 1]; a list whose scores are all equal maps to 1.0 (every item is equally the best)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def _mean_sd(scores: list[float]) -> tuple[float, float]:
    mean = sum(scores) / len(scores)
    return mean, math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))


def z_score(scores: list[float]) -> list[float]:
    """(s - mean) / sd over the list (population sd); a list whose scores are all equal maps to 0.0."""
    if not scores:
        return []
    mean, sd = _mean_sd(scores)
    return [0.0] * len(scores) if sd == 0 else [(s - mean) / sd for s in scores]


def dbsf(scores: list[float]) -> list[float]:
    """Distribution-based score fusion's scaling: min-max between mean - 3 sd and mean + 3 sd, clipped to [0, 1].

    Unlike min-max, one outlying best score does not squeeze the rest of the list towards 0, and a flat list
    stays flat (around 0.5) instead of being stretched over [0, 1]. All-equal scores map to 0.5."""
    if not scores:
        return []
    mean, sd = _mean_sd(scores)
    if sd == 0:
        return [0.5] * len(scores)
    return [min(1.0, max(0.0, (s - mean + 3 * sd) / (6 * sd))) for s in scores]


def max_scaled(scores: list[float]) -> list[float]:
    """s / max: min-max against the theoretical minimum 0 of BM25 and (in practice) cosine scores, not the list's.

    A flat list (cosines 0.50 to 0.45) stays flat (1.0 to 0.9) instead of being stretched over [0, 1], so its
    small differences cannot outvote a list with a clear winner. A best score <= 0 maps the list to 1.0."""
    if not scores:
        return []
    hi = max(scores)
    return [1.0] * len(scores) if hi <= 0 else [s / hi for s in scores]


NORMALISATIONS = {"minmax": min_max, "max": max_scaled, "zscore": z_score, "dbsf": dbsf}


def top_confidence(scores: list[float]) -> float:
    """How far a list's best score stands above the rest: (best - mean) / sd of the list, 0 for a flat list.

    A retriever that found one clearly matching passage (a rare name for BM25, a paraphrase for dense) stands
    out; one that matched nothing in particular returns a flat list."""
    if len(scores) < 2:
        return 0.0
    mean, sd = _mean_sd(scores)
    return 0.0 if sd == 0 else (max(scores) - mean) / sd


MARGIN_FLOOR = 0.1  # a list whose winner does not stand out keeps a little of its weight


def winner_margin(scores: list[float], k: int = 3) -> float:
    """How far a list's best score stands above its next `k`: (s_1 - mean(s_2 .. s_k+1)) / sd of the list, at least 0.

    Unlike top_confidence (best against the whole list), this measures the gap to the runners-up: a retriever
    sure of one passage (a rare name for BM25, a close paraphrase for dense) puts it well clear of the next few;
    on questions asked without seeing the text BM25's first few are level and dense's winner stands clear, on
    questions written from the passage it is often the other way round (docs/benchmarks.md)."""
    if len(scores) <= k:
        return 0.0
    ranked = sorted(scores, reverse=True)
    _, sd = _mean_sd(scores)
    return 0.0 if sd == 0 else max((ranked[0] - sum(ranked[1 : k + 1]) / k) / sd, 0.0)


def adaptive_weights(
    ranked: dict[str, list[Passage]],
    weights: dict[str, float] | None,
    power: float,
    depth: int,
    signal: AdaptiveSignal = "confidence",
    k: int = 3,
) -> dict[str, float]:
    """Per-query weights over each list's first `depth` scores, rescaled to sum to the static weights' sum:
    `confidence`: w_r * top_confidence_r ** power; `margin`: w_r * (MARGIN_FLOOR + winner_margin_r(k)) ** power.
    power 0 gives the static weights; if no retriever stands out they are kept."""
    w = _weights(ranked, weights)
    if power == 0:
        return w
    if signal == "margin":
        conf = {name: MARGIN_FLOOR + winner_margin([p.score for p in ranked[name][:depth]], k) for name in ranked}
    else:
        conf = {name: max(top_confidence([p.score for p in ranked[name][:depth]]), 0.0) for name in ranked}
    raw = {name: w[name] * conf[name] ** power for name in ranked}
    total = sum(raw.values())
    if total <= 0:
        return w
    return {name: raw[name] * sum(w.values()) / total for name in ranked}


def convex_combination(
    ranked: dict[str, list[Passage]], weights: dict[str, float] | None = None, normalization: Normalization = "minmax"
) -> list[Passage]:
    """Normalised convex combination: fused(d) = sum_r w_r * norm_r(d) / sum_r w_r.

    Each retriever's scores are normalised over the list it returned (`minmax`, `zscore` or `dbsf`); a passage
    a retriever did not return gets that list's lowest normalised score (it ranked below the worst returned
    passage; for min-max that is 0).
    """
    w = _weights(ranked, weights)
    total = sum(w.values())
    if total <= 0:
        raise ValueError("at least one fusion weight must be > 0")
    merged = _collect(ranked)
    normalised: dict[str, dict[str, float]] = {}
    floor: dict[str, float] = {}
    for name, passages in ranked.items():
        values = NORMALISATIONS[normalization]([p.score for p in passages])
        normalised[name] = dict(zip((p.chunk_id for p in passages), values))
        floor[name] = min(values, default=0.0)
    fused = {cid: sum(w[name] * normalised[name].get(cid, floor[name]) for name in ranked) / total for cid in merged}
    return _finish(merged, fused)


def fuse(
    ranked: dict[str, list[Passage]],
    method: FusionMethod = "convex",
    weights: dict[str, float] | None = None,
    rrf_k: float = 60.0,
    normalization: Normalization = "minmax",
    adaptive_power: float = 0.0,
    adaptive_depth: int = 100,
    adaptive_signal: AdaptiveSignal = "confidence",
    adaptive_k: int = 3,
) -> list[Passage]:
    """Fuse with `method` (rrf or convex); with adaptive_power > 0 the weights are set per query from how much
    each list's best score stands out (adaptive_weights)."""
    if adaptive_power:
        weights = adaptive_weights(ranked, weights, adaptive_power, adaptive_depth, adaptive_signal, adaptive_k)
    if method == "rrf":
        return reciprocal_rank_fusion(ranked, k=rrf_k, weights=weights)
    return convex_combination(ranked, weights=weights, normalization=normalization)
