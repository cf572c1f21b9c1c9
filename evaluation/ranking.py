"""Ranking metrics over document ids (BEIR / TREC conventions).

`ranking` is a list of document ids, best first, without duplicates; `qrels` maps relevant ids to a graded
relevance (> 0). Gains are linear (rel / log2(rank + 1)), as in BEIR's pytrec_eval setup.
"""

from __future__ import annotations

import math


def dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranking: list[str], qrels: dict[str, float], k: int = 10) -> float:
    ideal = dcg(sorted((r for r in qrels.values() if r > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([qrels.get(doc, 0.0) for doc in ranking[:k]]) / ideal


def recall_at_k(ranking: list[str], qrels: dict[str, float], k: int) -> float:
    relevant = {d for d, r in qrels.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at_k(ranking: list[str], qrels: dict[str, float], k: int = 10) -> float:
    for i, doc in enumerate(ranking[:k]):
        if qrels.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def dedupe(doc_ids: list[str]) -> list[str]:
    """Chunk hits -> document ranking: a document takes the rank of its best chunk."""
    return list(dict.fromkeys(doc_ids))


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


METRIC_NAMES = ("ndcg@10", "recall@1", "recall@5", "recall@10", "recall@100", "mrr@10")


def score_query(ranking: list[str], qrels: dict[str, float]) -> dict[str, float]:
    return {
        "ndcg@10": ndcg_at_k(ranking, qrels, 10),
        "recall@1": recall_at_k(ranking, qrels, 1),
        "recall@5": recall_at_k(ranking, qrels, 5),
        "recall@10": recall_at_k(ranking, qrels, 10),
        "recall@100": recall_at_k(ranking, qrels, 100),
        "mrr@10": mrr_at_k(ranking, qrels, 10),
    }
