"""Per-workload (per-collection) fusion weight from label-free statistics of a batch of unlabelled queries (dev only).

    cd /work/main && OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python \
        bench/research/workload_weight/experiment.py            # ~10 min the first time (grid cached), then seconds

Needs bench/fusion_tuning.py cache (the cached BM25 / dense top-200 runs) and the suite's corpus.jsonl files.
Reads only the `dev` splits: no metric is computed on any test split.

1. Grid: every dev query of every suite dataset under convex fusion with w_dense in {0.0, 0.1, ..., 1.0}
   (z-score, the default family, and min-max), and the single lists (bm25, dense over windows, dense over chunk
   vectors: fusion_tuning.SINGLES); nDCG@10 and R@1 per query, cached in cache/grid.pkl.
2. Features: label-free statistics per query (the query text, both ranked lists, their scores, the corpus text of
   the lists' first documents), averaged over a dataset's dev queries; per-query values cached in cache/features.pkl.
3. Leave one group out: groups are datasets that share dev questions (hotpotqa + hotpot-single: the 182
   hotpot-single dev questions are hotpotqa dev questions; squad-intros + squad-low-overlap: 205 shared), the rest
   one each; nq-toy (2 dev questions) is reported, never fitted on. A rule maps one feature to a weight:
   `linear` (least squares of the best weight on the feature, clipped, rounded to 0.1), `stump` (one threshold,
   each side the weight with the highest mean nDCG@10 relative to each training set's best weight) or `constant`
   (no feature: the weight with the highest mean relative nDCG@10 over the training sets). The (feature, rule) is
   chosen by the mean LOGO relative nDCG@10 regret; `nested` repeats that choice inside every fold (the honest
   figure, nothing about the held-out group is seen), `global` chooses once over all folds (what is reported per
   dataset, slightly optimistic).
4. Per dataset: the predicted weight's dev nDCG@10 and R@1 against the default (z-score 0.5 / 0.5), the single
   lists, and the no-loss check (fusion_tuning.significant_losses against the best single list on that dataset and
   metric, paired sign-flip p < 0.05); stability of the prediction when the held-out set's feature is computed on
   a random half / 100 of its dev queries (200 draws each).

Writes bench/research/workload_weight/dev-lodo.json and prints the Markdown tables of the README.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # bench/, for common.py and fusion_tuning.py
from fusion_tuning import (  # noqa: E402
    DATASETS,
    SINGLES,
    SUITE,
    chunk_runs,
    load,
    per_query_metrics,
    significant_losses,
)

from switchyard.retrievers.fusion import top_confidence, winner_margin  # noqa: E402

METRICS = ("ndcg@10", "recall@1")
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))  # w_dense; w_bm25 = 1 - w_dense
DEFAULT = 0.5
NORMS = ("zscore", "minmax")
TOY = ("nq-toy",)  # two dev questions: reported, not fitted on
GROUPS = {"hotpotqa": "hotpot", "hotpot-single": "hotpot", "squad-intros": "squad", "squad-low-overlap": "squad"}
SUBSETS = (("half", None), ("100", 100))
DRAWS = 200
CACHE = HERE / "cache"

STOP = set(
    """a an the of in on at to for from by with about as into over under and or but not no is are was were be been
    being am do does did has have had what which who whom whose when where why how that this these those it its
    there their they them he she his her i you we our your my me us s t can will would should could may might
    than then so if also such any all some more most other one""".split()
)
WH = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")


def fusion(norm: str, w_dense: float) -> dict:
    return dict(normalization=norm, weights={"bm25": round(1 - w_dense, 1), "dense": w_dense})


def grid(data: dict) -> dict:
    """{dataset: {config name: {metric: per-query array over dev qids}}}; config names 'bm25', 'dense', 'chunk',
    'zscore:0.3' (w_dense)."""
    target = CACHE / "grid.pkl"
    if target.exists():
        return pickle.loads(target.read_bytes())
    out = {}
    for name, d in data.items():
        t0 = time.perf_counter()
        chunk_runs(d)
        rows = {r: per_query_metrics(d, "dev", r, METRICS) for r in SINGLES}
        for norm in NORMS:
            for w in WEIGHTS:
                rows[f"{norm}:{w}"] = per_query_metrics(d, "dev", fusion(norm, w), METRICS)
        out[name] = rows
        d["runs"].pop("chunk", None)
        d.pop("matrix", None)
        print(f"grid {name}: {len(d['qrels']['dev'])} dev queries, {time.perf_counter() - t0:.0f} s", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    target.write_bytes(pickle.dumps(out))
    return out


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"\w+", text.lower()) if t not in STOP]


def corpus_text(name: str) -> dict[str, set[str]]:
    out = {}
    with (SUITE / name / "corpus.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            out[row["_id"]] = set(tokens(f"{row.get('title', '')} {row.get('text', '')}"))
    return out


def docs(rows: list) -> list[str]:
    return list(dict.fromkeys(d for _, d, _ in rows))


FEATURES = (
    "agree@1",  # share of queries whose BM25 and dense first documents are the same
    "overlap@10",  # |BM25 top-10 docs & dense top-10 docs| / 10
    "bm25_top_in_dense",  # log(1 + rank) of BM25's first document in dense's list (log 201 where absent)
    "dense_top_in_bm25",  # the reverse
    "bm25_margin3",  # winner_margin(k=3) of BM25's scores (the library's margin signal), first 100
    "dense_margin3",
    "margin3_diff",  # bm25_margin3 - dense_margin3
    "bm25_conf",  # top_confidence (best against the list's mean, in sd), first 100
    "dense_conf",
    "conf_diff",
    "dense_top1_cos",  # dense first score (cosine)
    "dense_gap",  # dense s1 - s2 (cosine)
    "bm25_top_per_term",  # BM25 first score / number of query content terms
    "qlen",  # query content terms
    "q_in_bm25_top",  # share of query content terms in BM25's first document
    "q_in_dense_top",  # share of query content terms in dense's first document
    "q_idf",  # mean idf of query content terms / log(N + 1)
    "question_form",  # share of queries starting with a wh-word or ending with '?'
)


def query_features(data: dict, name: str) -> dict[str, np.ndarray]:
    """Per dev query (label-free: the query, the two lists and scores, corpus text), in dev qrels order."""
    text = corpus_text(name)
    df = Counter(t for terms in text.values() for t in terms)
    n_docs = len(text)
    out = {f: [] for f in FEATURES}
    for qid in data["qrels"]["dev"]:
        q = data["queries"][qid]
        terms = tokens(q)
        uniq = set(terms)
        bm25, dense = data["runs"]["bm25"][qid], data["runs"]["dense"][qid]
        b_docs, d_docs = docs(bm25), docs(dense)
        b_scores = [s for *_, s in bm25][:100]
        d_scores = [s for *_, s in dense][:100]
        out["agree@1"].append(float(bool(b_docs) and bool(d_docs) and b_docs[0] == d_docs[0]))
        out["overlap@10"].append(len(set(b_docs[:10]) & set(d_docs[:10])) / 10)
        out["bm25_top_in_dense"].append(
            math.log1p(d_docs.index(b_docs[0])) if b_docs and b_docs[0] in d_docs else math.log1p(len(d_docs) or 200)
        )
        out["dense_top_in_bm25"].append(
            math.log1p(b_docs.index(d_docs[0])) if d_docs and d_docs[0] in b_docs else math.log1p(200)
        )
        bm, dm = winner_margin(b_scores, 3), winner_margin(d_scores, 3)
        out["bm25_margin3"].append(bm)
        out["dense_margin3"].append(dm)
        out["margin3_diff"].append(bm - dm)
        bc, dc = top_confidence(b_scores), top_confidence(d_scores)
        out["bm25_conf"].append(bc)
        out["dense_conf"].append(dc)
        out["conf_diff"].append(bc - dc)
        out["dense_top1_cos"].append(d_scores[0] if d_scores else 0.0)
        out["dense_gap"].append(d_scores[0] - d_scores[1] if len(d_scores) > 1 else 0.0)
        out["bm25_top_per_term"].append(b_scores[0] / max(len(terms), 1) if b_scores else 0.0)
        out["qlen"].append(float(len(terms)))
        out["q_in_bm25_top"].append(len(uniq & text.get(b_docs[0], set())) / len(uniq) if uniq and b_docs else 0.0)
        out["q_in_dense_top"].append(len(uniq & text.get(d_docs[0], set())) / len(uniq) if uniq and d_docs else 0.0)
        out["q_idf"].append(
            float(np.mean([math.log((n_docs + 1) / (df.get(t, 0) + 1)) for t in uniq]) / math.log(n_docs + 1))
            if uniq
            else 0.0
        )
        low = q.strip().lower()
        out["question_form"].append(float(low.startswith(WH) or low.endswith("?")))
    return {f: np.asarray(v, dtype=float) for f, v in out.items()}


def features(data: dict) -> dict:
    target = CACHE / "features.pkl"
    if target.exists():
        return pickle.loads(target.read_bytes())
    out = {name: query_features(d, name) for name, d in data.items()}
    CACHE.mkdir(parents=True, exist_ok=True)
    target.write_bytes(pickle.dumps(out))
    return out


# ---------------------------------------------------------------------------------------------------- the rules


def curve(g: dict, norm: str = "zscore") -> np.ndarray:
    """Mean dev nDCG@10 per weight in WEIGHTS."""
    return np.array([g[f"{norm}:{w}"]["ndcg@10"].mean() for w in WEIGHTS])


def best_weight(c: np.ndarray) -> float:
    """argmax of the curve; ties (within 1e-9) go to the weight nearest the default."""
    top = c.max()
    return min((w for w, v in zip(WEIGHTS, c) if v >= top - 1e-9), key=lambda w: (abs(w - DEFAULT), w))


def relative(c: np.ndarray) -> np.ndarray:
    return c / c.max() if c.max() > 0 else np.ones_like(c)


def best_common(rels: list[np.ndarray]) -> float:
    """The weight with the highest mean relative nDCG@10 over some training sets (ties: nearest the default)."""
    return best_weight(np.mean(rels, axis=0))


def fit(rule: str, x: np.ndarray, y: np.ndarray, rels: list[np.ndarray]):
    """A predictor f(feature value) -> weight from training points (x: feature, y: best weight, rels: curves)."""
    snap = lambda v: float(min(1.0, max(0.0, round(v * 10) / 10)))  # noqa: E731
    if rule == "constant" or np.ptp(x) == 0:
        w = best_common(rels)
        return lambda v: w
    if rule == "linear":
        b, a = np.polyfit(x, y, 1)
        return lambda v: snap(a + b * v)
    # stump: threshold between consecutive distinct feature values, >= 2 training sets a side
    best = _stump(x, rels)
    if best is None:
        w = best_common(rels)
        return lambda v: w
    _, t, wl, wr = best
    return lambda v: wl if v < t else wr


def _stump(x: np.ndarray, rels: list[np.ndarray]):
    """The best threshold between consecutive distinct feature values, >= 2 training sets a side: (gain,
    threshold, weight below, weight at or above), or None."""
    order = np.argsort(x)
    best = None
    for i in range(2, len(x) - 1):
        lo, hi = x[order[i - 1]], x[order[i]]
        if lo == hi:
            continue
        left, right = order[:i], order[i:]
        wl, wr = best_common([rels[j] for j in left]), best_common([rels[j] for j in right])
        gain = sum(rels[j][WEIGHTS.index(wl)] for j in left) + sum(rels[j][WEIGHTS.index(wr)] for j in right)
        if best is None or gain > best[0] + 1e-12:
            best = (gain, (lo + hi) / 2, wl, wr)
    return best


def fit_params(rule: str, x: np.ndarray, y: np.ndarray, rels: list[np.ndarray]) -> dict:
    """The fitted rule's parameters, for the report (same maths as fit)."""
    if rule == "constant" or np.ptp(x) == 0:
        return {"weight": best_common(rels)}
    if rule == "linear":
        b, a = np.polyfit(x, y, 1)
        return {"intercept": round(float(a), 4), "slope": round(float(b), 4)}
    best = _stump(x, rels)
    return {"threshold": round(float(best[1]), 4), "below": best[2], "at_or_above": best[3]}


RULES = ("constant", "linear", "stump")


def logo(names: list[str], X: dict, Y: dict, R: dict, feature: str, rule: str) -> dict[str, float]:
    """Leave one group out: each name's predicted weight from the names outside its group."""
    out = {}
    for n in names:
        train = [m for m in names if GROUPS.get(m, m) != GROUPS.get(n, n)]
        f = fit(rule, np.array([X[m][feature] for m in train]), np.array([Y[m] for m in train]), [R[m] for m in train])
        out[n] = f(X[n][feature])
    return out


def regret(pred: dict[str, float], R: dict) -> float:
    """Mean relative nDCG@10 regret: 1 - nDCG@10(predicted weight) / nDCG@10(best weight), over the names."""
    return float(np.mean([1 - R[n][WEIGHTS.index(w)] for n, w in pred.items()]))


def choose(names: list[str], X: dict, Y: dict, R: dict) -> tuple[tuple[str, str], dict]:
    """The (feature, rule) with the lowest LOGO regret over `names`; the constant rule is one candidate (feature
    None). Ties: constant first, then linear, then stump, then feature order."""
    scores = {(None, "constant"): regret(logo(names, X, Y, R, FEATURES[0], "constant"), R)}
    for rule in ("linear", "stump"):
        for f in FEATURES:
            scores[(f, rule)] = regret(logo(names, X, Y, R, f, rule), R)
    pick = min(scores, key=lambda k: (round(scores[k], 6), RULES.index(k[1]), FEATURES.index(k[0]) if k[0] else -1))
    return pick, scores


# ---------------------------------------------------------------------------------------------------- the report


_NO_LOSS: dict = {}


def no_loss(g: dict, config: str) -> dict[str, float]:
    """significant_losses of one config against the best single list (SINGLES, best mean on dev) per metric
    (memoised: the test draws 10,000 sign flips)."""
    key = (id(g), config)
    if key not in _NO_LOSS:
        best = {m: max((g[r][m] for r in SINGLES), key=np.mean) for m in METRICS}
        _NO_LOSS[key] = significant_losses({m: g[config][m] for m in METRICS}, best)
    return _NO_LOSS[key]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE / "dev-lodo.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = load(SUITE)
    names_all = [n for n in DATASETS if n in data]
    G = grid(data)
    Q = features(data)
    X = {n: {f: float(Q[n][f].mean()) for f in FEATURES} for n in names_all}
    C = {n: {norm: curve(G[n], norm) for norm in NORMS} for n in names_all}
    R = {n: relative(C[n]["zscore"]) for n in names_all}
    Y = {n: best_weight(C[n]["zscore"]) for n in names_all}
    names = [n for n in names_all if n not in TOY]

    # 2. best weight per dataset and the weights that pass the no-loss check
    per_dataset = {}
    for n in names_all:
        g = G[n]
        singles = {r: {m: round(float(g[r][m].mean()), 4) for m in METRICS} for r in SINGLES}
        sweep = {}
        for norm in NORMS:
            for w in WEIGHTS:
                key = f"{norm}:{w}"
                sweep[key] = {
                    **{m: round(float(g[key][m].mean()), 4) for m in METRICS},
                    "losses": no_loss(g, key),
                }
        per_dataset[n] = {
            "dev_queries": len(g["bm25"]["ndcg@10"]),
            "features": {f: round(v, 4) for f, v in X[n].items()},
            "singles": singles,
            "singles_losses": {r: no_loss(g, r) for r in SINGLES},
            "best_w_dense": {norm: best_weight(C[n][norm]) for norm in NORMS},
            "best_ndcg@10": {norm: round(float(C[n][norm].max()), 4) for norm in NORMS},
            "no_loss_w_dense": {norm: [w for w in WEIGHTS if not sweep[f"{norm}:{w}"]["losses"]] for norm in NORMS},
            "sweep": sweep,
        }

    # 3. the (feature, rule) by LOGO regret over all groups (global), and nested inside every fold (honest)
    (feat, rule), scores = choose(names, X, Y, R)
    global_pred = logo(names, X, Y, R, feat or FEATURES[0], rule)
    constant_pred = logo(names, X, Y, R, FEATURES[0], "constant")
    # does any feature carry the signal? rank correlation over the ten sets with the best weight and with the tilt
    # (nDCG@10 at w_dense 0.8 minus at 0.2: a smoother target than the argmax)
    from scipy.stats import spearmanr

    tilt = {n: float(C[n]["zscore"][8] - C[n]["zscore"][2]) for n in names}
    corr = {
        f: {
            "rho_best_w": round(float(spearmanr([X[n][f] for n in names], [Y[n] for n in names])[0]), 3),
            "rho_tilt": round(float(spearmanr([X[n][f] for n in names], [tilt[n] for n in names])[0]), 3),
        }
        for f in FEATURES
    }
    ranked = sorted(scores.items(), key=lambda kv: kv[1])
    nested = {}
    for n in names:
        inner = [m for m in names if GROUPS.get(m, m) != GROUPS.get(n, n)]
        (f_in, r_in), _ = choose(inner, X, Y, R)
        fitted = fit(
            r_in,
            np.array([X[m][f_in or FEATURES[0]] for m in inner]),
            np.array([Y[m] for m in inner]),
            [R[m] for m in inner],
        )
        nested[n] = {"feature": f_in, "rule": r_in, "w_dense": fitted(X[n][f_in or FEATURES[0]])}
    fit_all = fit_params(
        rule,
        np.array([X[m][feat or FEATURES[0]] for m in names]),
        np.array([Y[m] for m in names]),
        [R[m] for m in names],
    )
    toy_pred = (
        fit(
            rule,
            np.array([X[m][feat or FEATURES[0]] for m in names]),
            np.array([Y[m] for m in names]),
            [R[m] for m in names],
        )(X["nq-toy"][feat or FEATURES[0]])
        if "nq-toy" in X
        else None
    )

    # 4. per dataset: predicted vs default vs singles, losses; stability of the prediction under subsampling
    rng = np.random.default_rng(0)
    rows = {}
    for n in names_all:
        g = G[n]
        w_g = global_pred.get(n, toy_pred)
        w_n = nested[n]["w_dense"] if n in nested else None
        entry = {
            "best_w_dense": Y[n],
            "global_w_dense": w_g,
            "nested_w_dense": w_n,
            "nested_choice": {k: nested[n][k] for k in ("feature", "rule")} if n in nested else None,
        }
        entry["constant_w_dense"] = constant_pred.get(n)
        for label, w in (
            ("global", w_g),
            ("nested", w_n),
            ("constant", constant_pred.get(n)),
            ("default", DEFAULT),
            ("best", Y[n]),
        ):
            if w is None:
                continue
            key = f"zscore:{w}"
            entry[label] = {
                **{m: round(float(g[key][m].mean()), 4) for m in METRICS},
                "losses": no_loss(g, key),
            }
        # stability: the held-out feature from a random subset of its dev queries, the rule fitted on the others
        if n in names:
            train = [m for m in names if GROUPS.get(m, m) != GROUPS.get(n, n)]
            f_key = feat or FEATURES[0]
            fitted = fit(
                rule, np.array([X[m][f_key] for m in train]), np.array([Y[m] for m in train]), [R[m] for m in train]
            )
            per_q = Q[n][f_key]
            stab = {}
            for label, size in SUBSETS:
                k = len(per_q) // 2 if size is None else min(size, len(per_q))
                preds = [fitted(float(per_q[rng.choice(len(per_q), k, replace=False)].mean())) for _ in range(DRAWS)]
                counts = Counter(preds)
                stab[label] = {
                    "queries": k,
                    "same_as_full": round(counts[w_g] / DRAWS, 3),
                    "weights": {str(w): round(c / DRAWS, 3) for w, c in sorted(counts.items())},
                    "mean_ndcg@10": round(float(np.mean([g[f"zscore:{w}"]["ndcg@10"].mean() for w in preds])), 4),
                    "share_with_loss": round(float(np.mean([bool(no_loss(g, f"zscore:{w}")) for w in preds])), 3),
                }
            entry["stability"] = stab
        rows[n] = entry

    LABELS = ("global", "nested", "constant", "default", "best")

    def macro(label: str) -> dict:
        return {m: round(float(np.mean([rows[n][label][m] for n in names])), 4) for m in METRICS}

    result = {
        "split": "dev",
        "note": "dev splits only; nq-toy (2 dev questions) is never fitted on; LOGO groups: " + json.dumps(GROUPS),
        "weights_w_dense": WEIGHTS,
        "feature": feat,
        "rule": rule,
        "rule_fitted_on_all_ten": fit_all,
        "logo_regret": {f"{k[0]} {k[1]}": round(v, 5) for k, v in ranked},
        "macro_ten": {lab: macro(lab) for lab in LABELS},
        "sets_with_loss": {lab: [n for n in names if rows[n][lab]["losses"]] for lab in LABELS},
        "tilt_ndcg@10_w0.8_minus_w0.2": {n: round(v, 4) for n, v in tilt.items()},
        "spearman_over_ten": corr,
        "datasets": rows,
        "per_dataset": per_dataset,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    args.out.write_text(json.dumps(result, indent=1))

    # ------------------------------------------------------------------- Markdown
    print(f"feature {feat}, rule {rule}, fitted on all ten: {fit_all}")
    print("LOGO regret (mean relative nDCG@10 loss vs each set's best weight), best 12:")
    for k, v in ranked[:12]:
        print(f"  {k[0]} {k[1]}: {v:.5f}")
    print(f"  constant: {scores[(None, 'constant')]:.5f}")
    print(
        "\n| dataset (dev q) | feature | best w_dense | no-loss w_dense (zscore) | LOGO w | nDCG@10 LOGO / default / bm25 / dense / chunk | R@1 LOGO / default / bm25 / dense / chunk | losses LOGO | losses default | nested w |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in names_all:
        e, g = rows[n], per_dataset[n]
        s = g["singles"]
        fmt = lambda m, e=e, s=s: " / ".join(  # noqa: E731
            [f"{e['global'][m]:.4f}", f"{e['default'][m]:.4f}"] + [f"{s[r][m]:.4f}" for r in SINGLES]
        )
        loss = lambda lab, e=e: ", ".join(f"{k} p {p}" for k, p in e[lab]["losses"].items()) or "none"  # noqa: E731
        nl = g["no_loss_w_dense"]["zscore"]
        print(
            f"| {n} ({g['dev_queries']}) | {X[n][feat or FEATURES[0]]:.3f} | {Y[n]} | "
            f"{nl[0] if nl else '-'}..{nl[-1] if nl else '-'} ({len(nl)}) | {e['global_w_dense']} | {fmt('ndcg@10')} | "
            f"{fmt('recall@1')} | {loss('global')} | {loss('default')} | "
            f"{e['nested_w_dense'] if e['nested_w_dense'] is not None else '-'} |"
        )
    print("\n| feature | " + " | ".join(names) + " | Spearman vs best w | vs tilt |")
    print("|---" * (len(names) + 3) + "|")
    for f in FEATURES:
        print(
            f"| {f} | "
            + " | ".join(f"{X[n][f]:.3f}" for n in names)
            + f" | {corr[f]['rho_best_w']:+.2f} | {corr[f]['rho_tilt']:+.2f} |"
        )
    print("| best w_dense | " + " | ".join(str(Y[n]) for n in names) + " | | |")
    print("| tilt | " + " | ".join(f"{tilt[n]:+.3f}" for n in names) + " | | |")
    print("constant-rule LOGO weights:", json.dumps(constant_pred))
    print("\nmacro over the ten:", json.dumps(result["macro_ten"]))
    print("sets with a loss beyond noise:", json.dumps(result["sets_with_loss"]))
    print("nested choices:", json.dumps({n: rows[n]["nested_choice"] for n in names}))
    print("\n| dataset | half: queries, same as full, weights | 100: queries, same as full, weights |")
    print("|---|---|---|")
    for n in names:
        st = rows[n]["stability"]
        cell = lambda s: f"{s['queries']}, {s['same_as_full']:.2f}, {s['weights']} (loss share {s['share_with_loss']})"  # noqa: E731
        print(f"| {n} | {cell(st['half'])} | {cell(st['100'])} |")
    print("\nminmax best w_dense / best nDCG@10 vs zscore:")
    for n in names_all:
        g = per_dataset[n]
        print(
            f"  {n}: zscore {g['best_w_dense']['zscore']} {g['best_ndcg@10']['zscore']}, "
            f"minmax {g['best_w_dense']['minmax']} {g['best_ndcg@10']['minmax']}, "
            f"no-loss minmax {g['no_loss_w_dense']['minmax']}"
        )
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
