"""bench/fusion_tuning.py's selection rule for retrieval configurations (docs/benchmarks.md, "Retrieval on questions
asked without seeing the text"): a configuration's score is its worst ratio to the best single list over datasets and
metrics; the highest wins, near-ties go to macro nDCG@10."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
fusion_tuning = pytest.importorskip("fusion_tuning")

BEST = {"lexical": {"ndcg@10": 0.8, "recall@1": 0.5}, "natural": {"ndcg@10": 0.9, "recall@1": 0.8}}


def test_the_worst_ratio_is_the_weakest_dataset_and_metric():
    figures = {"lexical": {"ndcg@10": 0.84, "recall@1": 0.5}, "natural": {"ndcg@10": 0.9, "recall@1": 0.72}}
    ratio, where = fusion_tuning.worst_ratio(figures, BEST)
    assert ratio == pytest.approx(0.9) and where == "natural recall@1"


def test_a_dataset_no_list_gets_right_does_not_decide():
    best = {**BEST, "empty": {"ndcg@10": 0.0, "recall@1": 0.0}}
    figures = {**BEST, "empty": {"ndcg@10": 0.0, "recall@1": 0.0}}
    assert fusion_tuning.worst_ratio(figures, best) == (1.0, "lexical ndcg@10")


def test_the_highest_worst_ratio_wins_and_near_ties_go_to_macro_ndcg():
    rows = [
        {"name": "robust", "worst_ratio": 0.990, "macro_ndcg@10": 0.70},
        {"name": "tied, better on average", "worst_ratio": 0.989, "macro_ndcg@10": 0.75},
        {"name": "best on average, fragile", "worst_ratio": 0.90, "macro_ndcg@10": 0.80},
        {"name": "less fragile", "worst_ratio": 0.95, "macro_ndcg@10": 0.60},
    ]
    ranked = [r["name"] for r in fusion_tuning.rank_by_rule(rows)]
    assert ranked == ["tied, better on average", "robust", "less fragile", "best on average, fragile"]
