"""Cheap first-stage variants, tuned on TRAIN, confirmed on TEST:
  A. rank_bm25-style BM25 (project Tokenizer + Lucene idf, = backend rank_bm25) with k1/b grid, alone and fused
  B. dense Rocchio PRF: q' = norm(q + alpha * mean(top-m fused chunk vectors)), re-search, fuse with BM25
  C. BM25 RM3-style expansion: top-T terms from the top-m fused chunks added with weight beta
Everything in numpy/scipy on the cached chunk table and runs.
"""
import itertools
import json
from collections import Counter

import numpy as np
import scipy.sparse as sp

from common import CACHE, fuse_lists, load_queries, load_runs, score_rankings, splits
from retrievers.bm25 import Tokenizer
from retrievers.documents import search_text

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
cids = meta["chunk_id"]
cidx = {c: i for i, c in enumerate(cids)}
queries = load_queries()
qids_all = json.loads((CACHE / "qids.json").read_text())
qpos = {q: i for i, q in enumerate(qids_all)}
QV = np.load(CACHE / "qvec_minilm.npy")
CV = np.load(CACHE / "chunk_vec_minilm.npy")
S = splits()
WB = 0.55  # tuned convex weight (02_fusion.py)

tok = Tokenizer(stem=True, remove_stop_words=True)
ctoks = [tok(search_text(t, x)) for t, x in zip(meta["title"], meta["text"])]
vocab = {}
rows, cols, vals = [], [], []
for i, ts in enumerate(ctoks):
    for t, n in Counter(ts).items():
        rows.append(i); cols.append(vocab.setdefault(t, len(vocab))); vals.append(n)
TF = sp.csr_matrix((vals, (rows, cols)), shape=(len(ctoks), len(vocab)), dtype=np.float64)
dl = np.array([len(t) for t in ctoks], dtype=np.float64)
N = len(ctoks)
df = np.bincount(TF.indices, minlength=len(vocab))
idf = np.log(1 + (N - df + 0.5) / (df + 0.5))
qtoks = {q: tok(queries[q]) for q in qids_all}


def bm25_matrix(k1, b):
    T = TF.tocoo()
    denom = T.data + k1 * (1 - b + b * dl[T.row] / dl.mean())
    w = idf[T.col] * T.data * (k1 + 1) / denom
    return sp.csc_matrix((w, (T.row, T.col)), shape=TF.shape)


def bm25_run(W, qweights: dict[int, float], k=200):
    if not qweights:
        return []
    idx = np.fromiter(qweights, int)
    s = np.asarray(W[:, idx] @ np.fromiter(qweights.values(), float)).ravel()
    top = np.argpartition(-s, k)[:k]
    top = top[np.lexsort((top, -s[top]))]
    return [(cids[i], float(s[i])) for i in top if s[i] > 0]


def qw(q):
    c = Counter(vocab[t] for t in qtoks[q] if t in vocab)  # duplicates count, as in rank_bm25
    return {k: float(v) for k, v in c.items()}


def as_docs(lists):
    return [doc_of[c] for c, _ in lists]


def ev(split, fn):
    return score_rankings({q: fn(q) for q in S[split]}, S[split])


def fused_docs(lex, den, wb=WB):
    return as_docs(fuse_lists({"bm25": lex, "dense": den}, "convex", {"bm25": wb, "dense": 1 - wb}))


def dense_search(v, k=200):
    s = CV @ v
    top = np.argpartition(-s, k)[:k]
    top = top[np.argsort(-s[top])]
    return [(cids[i], float(s[i])) for i in top]


out = []
def report(name, fn, tune_only=False):
    tr = ev("train", fn)
    te = None if tune_only else ev("test", fn)
    out.append((name, tr, te))
    print(f"| {name} | {tr['ndcg@10']:.4f} | {tr['recall@100']:.4f} | "
          + (f"{te['ndcg@10']:.4f} | {te['recall@100']:.4f} |" if te else "- | - |"), flush=True)
    return tr


print("| method | train nDCG@10 | train R@100 | test nDCG@10 | test R@100 |\n|---|---|---|---|---|")
report("lance BM25 + dense convex 0.55 (reference)", lambda q: fused_docs(runs["bm25"][q], runs["dense"][q]))

# ---- A. BM25 k1/b ------------------------------------------------------------------------------------------
best = None
for k1, b in itertools.product([0.6, 0.9, 1.2, 1.5, 2.0], [0.3, 0.5, 0.75, 0.9, 1.0]):
    W = bm25_matrix(k1, b)
    cache = {q: bm25_run(W, qw(q)) for q in S["train"]}
    alone = ev("train", lambda q: as_docs(cache[q]))["ndcg@10"]
    fused = ev("train", lambda q: fused_docs(cache[q], runs["dense"][q]))["ndcg@10"]
    print(f"  k1={k1} b={b}: bm25 {alone:.4f} fused {fused:.4f}", flush=True)
    if best is None or fused > best[0]:
        best = (fused, k1, b)
_, K1, B = best
for k1, b in [(1.2, 0.75), (K1, B)]:
    W = bm25_matrix(k1, b)
    report(f"rank_bm25 k1={k1} b={b} alone", lambda q: as_docs(bm25_run(W, qw(q))))
    for wb in (0.5, 0.55, 0.6):
        report(f"rank_bm25 k1={k1} b={b} + dense convex {wb}", lambda q: fused_docs(bm25_run(W, qw(q)), runs["dense"][q], wb))

# ---- B. dense Rocchio PRF ------------------------------------------------------------------------------------
def prf_dense(q, alpha, m):
    f = fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": WB, "dense": 1 - WB})
    fb = CV[[cidx[c] for c, _ in f[:m]]].mean(0)
    v = QV[qpos[q]] + alpha * fb
    return dense_search(v / np.linalg.norm(v))

best = None
for alpha, m in itertools.product([0.25, 0.5, 1.0, 2.0], [1, 3, 5, 10]):
    r = ev("train", lambda q: fused_docs(runs["bm25"][q], prf_dense(q, alpha, m)))["ndcg@10"]
    print(f"  PRF alpha={alpha} m={m}: {r:.4f}", flush=True)
    if best is None or r > best[0]:
        best = (r, alpha, m)
_, A, M = best
report(f"dense PRF alpha={A} m={M} + lance BM25 convex {WB}", lambda q: fused_docs(runs["bm25"][q], prf_dense(q, A, M)))

# ---- C. BM25 RM3-style expansion (on the rank_bm25-style scorer at the best k1/b) -----------------------------
W = bm25_matrix(K1, B)
def rm3(q, m, T, beta):
    f = fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": WB, "dense": 1 - WB})
    fb = Counter()
    for c, s in f[:m]:
        row = TF[cidx[c]]
        tot = row.sum()
        for j, n in zip(row.indices, row.data):
            fb[j] += s * n / tot * idf[j]
    base = qw(q)
    tot = sum(base.values()) or 1
    new = {k: (1 - beta) * v / tot for k, v in base.items()}
    top = fb.most_common(T)
    z = sum(v for _, v in top) or 1
    for j, v in top:
        new[j] = new.get(j, 0) + beta * v / z
    return bm25_run(W, new)

best = None
for m, T, beta in itertools.product([3, 5, 10], [10, 20], [0.2, 0.4]):
    r = ev("train", lambda q: fused_docs(rm3(q, m, T, beta), runs["dense"][q]))["ndcg@10"]
    print(f"  RM3 m={m} T={T} beta={beta}: {r:.4f}", flush=True)
    if best is None or r > best[0]:
        best = (r, m, T, beta)
_, m, T, beta = best
report(f"BM25(k1={K1},b={B}) RM3 m={m} T={T} beta={beta} + dense convex {WB}",
       lambda q: fused_docs(rm3(q, m, T, beta), runs["dense"][q]))
report(f"RM3 BM25 + PRF dense convex {WB}", lambda q: fused_docs(rm3(q, m, T, beta), prf_dense(q, A, M)))
(CACHE / "03_cheap.json").write_text(json.dumps(out))
