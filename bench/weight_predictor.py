"""A learned per-query fusion weight (issue 23, goal 1): can the two lists' score shapes pick each question's weight?

    .venv/bin/python bench/weight_predictor.py            # needs bench/fusion_tuning.py cache (the cached runs)
    .venv/bin/python bench/weight_predictor.py --model ridge
    .venv/bin/python bench/weight_predictor.py --min-gain 0.05

fusion_tuning.py oracle showed that a perfect per-query choice of the BM25 weight would gain +0.014..+0.10 nDCG@10
over the better single retriever on every dev set. This asks how much of that a predictor recovers. For every query
it computes features of the two cached top-100 lists (winner margins, top-score z-values, how much the lists agree
at the top, where each list's winner sits in the other) and the query's nDCG@10 + R@1 under each candidate weight
(z-score fusion, BM25 weight in CHOICES; 0 and 1 are dense alone and BM25 alone). One regressor per candidate
predicts that sum from the features; a query gets the candidate with the best prediction.

Evaluated the way an unseen kind of question would meet it: leave one dataset out on dev (trained on the other dev
sets; squad-intros and squad-low-overlap share questions, so they are held out together), then trained on every dev
set and reported on test. The rule, fixed before any figure: the predictor is worth adopting only if, held out, it
raises the worst dev margin over the better single retriever on nDCG@10 and on R@1 without lowering either macro
average of the shipped default.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from fusion_tuning import SUITE, _w, load, paired_p, per_query, winner_margin
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

CHOICES = (0.0, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0)  # BM25 weight; 0.0 = dense alone, 1.0 = BM25 alone
DEFAULT, DENSE, BM25 = CHOICES.index(0.5), CHOICES.index(0.0), CHOICES.index(1.0)
METRICS = ("ndcg@10", "recall@1")
TOP = 100


def candidate(b: float) -> dict | str:
    return "dense" if b == 0.0 else "bm25" if b == 1.0 else dict(normalization="zscore", weights=_w(b))


def list_features(scores: list[float]) -> list[float]:
    s = np.asarray(scores[:TOP], dtype=float)
    if not len(s):  # BM25 finds nothing when no query term is in the corpus
        return [0.0] * 5
    sd = s.std() or 1.0
    return [
        winner_margin(s, 1),
        winner_margin(s, 3),
        winner_margin(s, 5),
        (s[0] - s.mean()) / sd,
        (s[0] - s[min(9, len(s) - 1)]) / sd,
    ]


def rank_in(docs: list[str], other: list[str]) -> float:
    """log(1 + rank) of `docs`' winner in `other` (TOP where absent)."""
    return np.log1p(other.index(docs[0])) if docs and docs[0] in other else np.log1p(TOP)


def features(data: dict, qid: str) -> list[float]:
    bm25, dense = data["runs"]["bm25"][qid], data["runs"]["dense"][qid]
    b_docs = list(dict.fromkeys(d for _, d, _ in bm25))[:TOP]
    d_docs = list(dict.fromkeys(d for _, d, _ in dense))[:TOP]
    agree = [len(set(b_docs[:k]) & set(d_docs[:k])) / k for k in (1, 3, 10)]
    return (
        list_features([s for *_, s in bm25])
        + list_features([s for *_, s in dense])
        + agree
        + [rank_in(b_docs, d_docs), rank_in(d_docs, b_docs), dense[0][2]]
    )


def table(data: dict, split: str) -> dict:
    """Features and per-candidate metrics of every query of one dataset's split."""
    qids = list(data["qrels"][split])
    return {
        "qids": qids,
        "X": np.array([features(data, q) for q in qids]),
        **{m: np.stack([per_query(data, split, candidate(b), m) for b in CHOICES], axis=1) for m in METRICS},
    }


def fit(tables: list[dict], model: str) -> list:
    """One regressor per candidate, on every query of `tables` once (squad-intros and squad-low-overlap share 205 dev
    questions: the first table's rows count)."""
    seen: dict[str, int] = {}
    first = np.array([seen.setdefault(q, i) == i for i, q in enumerate(q for t in tables for q in t["qids"])])
    X = np.concatenate([t["X"] for t in tables])[first]
    target = np.concatenate([sum(t[m] for m in METRICS) for t in tables])[first]
    make = {
        "ridge": lambda: make_pipeline(StandardScaler(), Ridge(alpha=10.0)),
        "gbm": lambda: HistGradientBoostingRegressor(
            max_depth=3, max_iter=200, learning_rate=0.05, min_samples_leaf=40, random_state=0
        ),
    }[model]
    return [make().fit(X, target[:, j]) for j in range(len(CHOICES))]


def choose(models: list, t: dict, min_gain: float) -> np.ndarray:
    """Each query's candidate with the best prediction, or the default unless that beats it by `min_gain`."""
    predicted = np.stack([m.predict(t["X"]) for m in models], axis=1)
    best = np.argmax(predicted, axis=1)
    gain = predicted[np.arange(len(best)), best] - predicted[:, DEFAULT]
    return np.where(gain > min_gain, best, DEFAULT)


def report(title: str, tables: dict[str, dict], picks: dict[str, np.ndarray]) -> None:
    print(f"\n{title}")
    print(
        "| dataset | metric | bm25 | dense | default 0.5 | predicted | − default (p) | − better single | "
        "picks (" + " / ".join(str(b) for b in CHOICES) + ") |"
    )
    print("|---" * 9 + "|")
    margins = {m: {"default": [], "predicted": []} for m in METRICS}
    macro = {m: {"default": [], "predicted": []} for m in METRICS}
    for name, t in tables.items():
        counts = np.bincount(picks[name], minlength=len(CHOICES))
        rows = np.arange(len(picks[name]))
        for m in METRICS:
            got = t[m][rows, picks[name]]
            default, best_single = t[m][:, DEFAULT], max(t[m][:, DENSE].mean(), t[m][:, BM25].mean())
            for key, value in (("default", default.mean()), ("predicted", got.mean())):
                margins[m][key].append(value - best_single)
                macro[m][key].append(value)
            print(
                f"| {name} | {m} | {t[m][:, BM25].mean():.4f} | {t[m][:, DENSE].mean():.4f} | {default.mean():.4f} | "
                f"{got.mean():.4f} | {got.mean() - default.mean():+.4f} ({paired_p(got - default):.2f}) | "
                f"{got.mean() - best_single:+.4f} | {' / '.join(str(c) for c in counts)} |"
            )
    for m in METRICS:
        print(
            f"{m}: macro default {np.mean(macro[m]['default']):.4f}, predicted {np.mean(macro[m]['predicted']):.4f}; "
            f"worst margin over the better single default {min(margins[m]['default']):+.4f}, "
            f"predicted {min(margins[m]['predicted']):+.4f}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gbm", choices=["gbm", "ridge"])
    ap.add_argument(
        "--min-gain",
        type=float,
        default=0.0,
        help="keep the default weight unless a candidate's predicted nDCG@10 + R@1 is this much higher",
    )
    args = ap.parse_args()
    data = load(SUITE)
    if not data:
        print(f"no cached runs under {SUITE}/runs: run bench/fusion_tuning.py cache first", file=sys.stderr)
        return 2
    dev = {name: table(d, "dev") for name, d in data.items()}
    test = {name: table(d, "test") for name, d in data.items()}
    # squad-intros and squad-low-overlap share questions: held out together
    group = {name: "squad" if name.startswith("squad") else name for name in dev}
    held_out = {}
    for name in dev:
        models = fit([t for other, t in dev.items() if group[other] != group[name]], args.model)
        held_out[name] = choose(models, dev[name], args.min_gain)
    setting = f"{args.model}, min gain {args.min_gain}"
    report(f"dev, each dataset predicted by a model trained on the other datasets' dev ({setting})", dev, held_out)
    models = fit(list(dev.values()), args.model)
    report(
        f"test, model trained on every dev set ({setting})",
        test,
        {name: choose(models, t, args.min_gain) for name, t in test.items()},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
