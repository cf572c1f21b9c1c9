"""Rerank variant: re-fuse the first K fused candidates with BM25 and the FINE-TUNED MiniLM cosine instead of the base
MiniLM one: score = wb * minmax_list(bm25) + (1 - wb) * minmax_K(ft cosine). This is the fine-tuned model used
as a reranker over the existing index (no re-ingest). Tuned on DEV (150 held-out train queries), reported on TEST.
"""
import itertools
import json

import numpy as np

from common import CACHE, fuse_lists, load_runs, minmax, score_rankings, splits

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
cidx = {c: i for i, c in enumerate(meta["chunk_id"])}
qids_all = json.loads((CACHE / "qids.json").read_text())
qpos = {q: i for i, q in enumerate(qids_all)}
QF, CF = np.load(CACHE / "qvec_ft.npy"), np.load(CACHE / "chunk_vec_ft.npy")
S = splits()
S["dev"] = {q: S["train"][q] for q in json.loads((CACHE / "ft_split.json").read_text())["dev"]}
FUSED = {q: fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": .55, "dense": .45})
         for q in list(S["dev"]) + list(S["test"])}
BM = {}
for q in FUSED:
    lst = runs["bm25"][q]
    BM[q] = dict(zip([c for c, _ in lst], minmax([s for _, s in lst]))) if lst else {}


def refuse(q, K, wb):
    f = FUSED[q]
    head = f[:K]
    cos = minmax(CF[[cidx[c] for c, _ in head]] @ QF[qpos[q]])
    mix = [wb * BM[q].get(c, 0.0) + (1 - wb) * cos[i] for i, (c, _) in enumerate(head)]
    order = sorted(range(len(head)), key=lambda i: (-mix[i], head[i][0]))
    return [doc_of[head[i][0]] for i in order] + [doc_of[c] for c, _ in f[K:]]


def ev(split, fn):
    return score_rankings({q: fn(q) for q in S[split]}, S[split])


grid = []
for K, wb in itertools.product([20, 30, 50, 100], [0.3, 0.4, 0.5, 0.6]):
    grid.append((ev("dev", lambda q: refuse(q, K, wb))["ndcg@10"], K, wb))
    print(f"  K={K} wb={wb}: dev {grid[-1][0]:.4f}", flush=True)
r, K, wb = max(grid)
te = ev("test", lambda q: refuse(q, K, wb))
print(f"| re-fuse top-K with BM25 + fine-tuned MiniLM, K={K} wb={wb} | dev | {r:.4f} | test {te['ndcg@10']:.4f} | "
      f"R@100 {te['recall@100']:.4f} |")
for K2 in (20, 30):
    te = ev("test", lambda q: refuse(q, K2, wb))
    print(f"  (K={K2} wb={wb}: test {te['ndcg@10']:.4f})")
