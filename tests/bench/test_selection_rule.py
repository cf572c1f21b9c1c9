"""bench/fusion_tuning.py's selection rule for retrieval configurations (docs/benchmarks.md, "Retrieval on questions
asked without seeing the text"): a configuration's score is its worst ratio to the best single list over datasets and
metrics; the highest wins, near-ties go to macro nDCG@10."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
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


def test_the_second_rule_counts_only_losses_beyond_noise():
    rng = np.random.default_rng(0)
    best = {"large set ndcg@10": rng.uniform(0, 1, 400), "small gap ndcg@10": rng.uniform(0, 1, 400)}
    values = {
        "large set ndcg@10": best["large set ndcg@10"] - 0.05,  # every query a little worse: beyond noise
        "small gap ndcg@10": best["small gap ndcg@10"] + rng.normal(0, 0.2, 400) - 0.001,  # within noise
    }
    losses = fusion_tuning.significant_losses(values, best, flips=2_000)
    assert list(losses) == ["large set ndcg@10"] and losses["large set ndcg@10"] < 0.05


def test_a_gain_is_never_a_loss():
    best = {"d ndcg@10": np.linspace(0, 0.5, 300)}
    assert fusion_tuning.significant_losses({"d ndcg@10": best["d ndcg@10"] + 0.1}, best, flips=500) == {}


def test_the_second_rule_ranks_no_loss_first_then_by_macro_ndcg():
    rows = [
        {"name": "best on average, one loss", "losses": {"nq-open recall@1": 0.01}, "macro_ndcg@10": 0.90},
        {"name": "no loss", "losses": {}, "macro_ndcg@10": 0.80},
        {"name": "no loss, better", "losses": {}, "macro_ndcg@10": 0.85},
        {"name": "two losses", "losses": {"a": 0.0, "b": 0.0}, "macro_ndcg@10": 0.95},
    ]
    ranked = [r["name"] for r in fusion_tuning.rank_by_no_loss(rows)]
    assert ranked == ["no loss, better", "no loss", "best on average, one loss", "two losses"]
