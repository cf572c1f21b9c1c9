"""Learned reranker over fusion features (no extra model): the top-N fused documents of each query get features
from the cached BM25/dense runs and MiniLM vectors; a pointwise classifier (logistic regression or sklearn
HistGradientBoosting) is trained on TRAIN qrels. Train figures are 5-fold out-of-fold (grouped by query);
the model refit on all of TRAIN is applied to TEST. Documents below N keep the fused order.
"""
import json
import time

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from common import CACHE, fuse_lists, load_runs, score_rankings, splits

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
cidx = {c: i for i, c in enumerate(meta["chunk_id"])}
qids_all = json.loads((CACHE / "qids.json").read_text())
qpos = {q: i for i, q in enumerate(qids_all)}
QV, CV = np.load(CACHE / "qvec_minilm.npy"), np.load(CACHE / "chunk_vec_minilm.npy")
S = splits()
WB, N = 0.55, 30
doc_chunks = {}
for i, d in enumerate(meta["doc_id"]):
    doc_chunks.setdefault(d, []).append(i)
DOCMEAN = {d: (lambda v: v / np.linalg.norm(v))(CV[ix].mean(0)) for d, ix in doc_chunks.items()}


def doc_best(lst):
    out = {}
    for r, (c, s) in enumerate(lst, 1):
        d = doc_of[c]
        if d not in out:
            out[d] = (r, s)
    return out


def features(q):
    fused = fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": WB, "dense": 1 - WB})
    docs = []
    for c, s in fused:
        d = doc_of[c]
        if d not in [x[0] for x in docs]:
            docs.append((d, s))
    b, dn = doc_best(runs["bm25"][q]), doc_best(runs["dense"][q])
    bmax = runs["bm25"][q][0][1] if runs["bm25"][q] else 1.0
    qv = QV[qpos[q]]
    head = docs[:N]
    fs = np.array([s for _, s in head])
    cos = np.array([(CV[doc_chunks[d]] @ qv).max() for d, _ in head])
    rows = []
    for i, (d, s) in enumerate(head):
        br, bs = b.get(d, (300, 0.0))
        dr, _ = dn.get(d, (300, 0.0))
        rows.append([s, np.log1p(i), np.log(br), bs, bs / bmax, np.log(dr), cos[i], cos[i] - cos.max(),
                     DOCMEAN[d] @ qv, len(doc_chunks[d]), (s - fs.min()) / (fs.max() - fs.min() + 1e-9),
                     float(d in b), float(d in dn)])
    return [d for d, _ in head], np.array(rows), [d for d, _ in docs[N:]]


t = time.perf_counter()
F = {q: features(q) for q in list(S["train"]) + list(S["test"])}
print(f"features in {time.perf_counter() - t:.1f}s")


def stack(qs, qrels):
    X = np.vstack([F[q][1] for q in qs])
    y = np.concatenate([[1 if d in qrels[q] else 0 for d in F[q][0]] for q in qs])
    g = np.concatenate([[i] * len(F[q][0]) for i, q in enumerate(qs)])
    return X, y, g


def rank_with(model, q):
    docs, X, rest = F[q]
    p = model.predict_proba(X)[:, 1] if model is not None else -np.arange(len(docs))
    order = sorted(range(len(docs)), key=lambda i: (-p[i], docs[i]))
    return [docs[i] for i in order] + rest


makers = {
    **{f"logreg C={C}": (lambda C=C: make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000)))
       for C in (0.01, 0.1, 1.0)},
    **{f"hgb lr={lr} leaves={lv}": (lambda lr=lr, lv=lv: HistGradientBoostingClassifier(
        learning_rate=lr, max_leaf_nodes=lv, max_iter=200, min_samples_leaf=40, l2_regularization=1.0, random_state=0))
       for lr, lv in ((0.05, 7), (0.05, 15))},
}
tq = sorted(S["train"])
X, y, g = stack(tq, S["train"])
print("| method | train nDCG@10 (5-fold OOF) | train R@100 | test nDCG@10 | test R@100 |\n|---|---|---|---|---|")
base_tr = score_rankings({q: rank_with(None, q) for q in tq}, S["train"])
base_te = score_rankings({q: rank_with(None, q) for q in S["test"]}, S["test"])
print(f"| fusion convex {WB} (no rerank) | {base_tr['ndcg@10']:.4f} | {base_tr['recall@100']:.4f} | "
      f"{base_te['ndcg@10']:.4f} | {base_te['recall@100']:.4f} |")
for name, mk in makers.items():
    oof = {}
    for tr_idx, va_idx in GroupKFold(5).split(X, y, g):
        m = mk().fit(X[tr_idx], y[tr_idx])
        for qi in np.unique(g[va_idx]):
            oof[tq[qi]] = rank_with(m, tq[qi])
    tr = score_rankings(oof, S["train"])
    m = mk().fit(X, y)
    te = score_rankings({q: rank_with(m, q) for q in S["test"]}, S["test"])
    print(f"| LTR {name} top-{N} | {tr['ndcg@10']:.4f} | {tr['recall@100']:.4f} | {te['ndcg@10']:.4f} | "
          f"{te['recall@100']:.4f} |", flush=True)
