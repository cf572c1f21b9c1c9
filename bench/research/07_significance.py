"""Final TEST comparison of the chosen settings (all picked on TRAIN/DEV beforehand), with a paired randomization
test (10,000 sign flips) of each against the current default (convex 0.5/0.5) and against tuned fusion."""
import json

import numpy as np

from common import CACHE, fuse_lists, load_runs, per_query_ndcg, splits

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
cidx = {c: i for i, c in enumerate(meta["chunk_id"])}
doc_chunks = {}
for i, d in enumerate(meta["doc_id"]):
    doc_chunks.setdefault(d, []).append(i)
qids_all = json.loads((CACHE / "qids.json").read_text())
qpos = {q: i for i, q in enumerate(qids_all)}
QF, CF = np.load(CACHE / "qvec_ft.npy"), np.load(CACHE / "chunk_vec_ft.npy")
S = splits()
test = S["test"]


def fused(q, wb):
    return fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": wb, "dense": 1 - wb})


def rerank(q, K, w, wb=0.55, kind="ft"):
    f = fused(q, wb)
    head = f[:K]
    sec = CF[[cidx[c] for c, _ in head]] @ QF[qpos[q]]
    if kind == "ftdoc":
        sec = np.array([(CF[doc_chunks[doc_of[c]]] @ QF[qpos[q]]).max() for c, _ in head])
    from common import minmax
    mix = (1 - w) * minmax([s for _, s in head]) + w * minmax(sec)
    order = sorted(range(len(head)), key=lambda i: (-mix[i], head[i][0]))
    return [doc_of[head[i][0]] for i in order] + [doc_of[c] for c, _ in f[K:]]


def refuse(q, K, wb):
    from common import minmax
    f = fused(q, 0.55)
    head = f[:K]
    lst = runs["bm25"][q]
    bm = dict(zip([c for c, _ in lst], minmax([s for _, s in lst]))) if lst else {}
    cos = minmax(CF[[cidx[c] for c, _ in head]] @ QF[qpos[q]])
    mix = [wb * bm.get(c, 0.0) + (1 - wb) * cos[i] for i, (c, _) in enumerate(head)]
    order = sorted(range(len(head)), key=lambda i: (-mix[i], head[i][0]))
    return [doc_of[head[i][0]] for i in order] + [doc_of[c] for c, _ in f[K:]]


def ft_dense(q, k=200):
    s = CF @ QF[qpos[q]]
    top = np.argpartition(-s, k)[:k]
    top = top[np.argsort(-s[top])]
    return [(meta["chunk_id"][i], float(s[i])) for i in top]


def perm_test(a, b, n=10000, seed=0):
    d = a - b
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1, 1], size=(n, len(d)))
    return min(1.0, float(((signs * d).mean(1) >= abs(d.mean())).mean() * 2))


import sys
K, W = (int(sys.argv[1]), float(sys.argv[2])) if len(sys.argv) > 2 else (20, 0.5)
KIND = sys.argv[3] if len(sys.argv) > 3 else "ft"
systems = {
    "default convex 0.5/0.5": lambda q: [doc_of[c] for c, _ in fused(q, 0.5)],
    "tuned convex 0.55/0.45": lambda q: [doc_of[c] for c, _ in fused(q, 0.55)],
    f"fine-tuned MiniLM rescore [{KIND}] K={K} w={W}": lambda q: rerank(q, K, W, kind=KIND),
    "re-fuse top-30 with BM25 0.3 + fine-tuned MiniLM 0.7 (rerank)": lambda q: refuse(q, 30, 0.3),
    "BM25 + fine-tuned MiniLM dense, convex 0.4/0.6 (re-ingest)": lambda q: [doc_of[c] for c, _ in fuse_lists(
        {"bm25": runs["bm25"][q], "dense": ft_dense(q)}, "convex", {"bm25": 0.4, "dense": 0.6})],
}
pq = {n: per_query_ndcg({q: f(q) for q in test}, test) for n, f in systems.items()}
names = list(pq)
print("| system (TEST, 300 q) | nDCG@10 | Δ vs default | p (vs default) | Δ vs tuned | p (vs tuned) | wins/losses vs tuned |")
print("|---|---|---|---|---|---|---|")
for n in names:
    a, b0, b1 = pq[n], pq[names[0]], pq[names[1]]
    print(f"| {n} | {a.mean():.4f} | {a.mean() - b0.mean():+.4f} | {perm_test(a, b0):.3f} | "
          f"{a.mean() - b1.mean():+.4f} | {perm_test(a, b1):.3f} | {(a > b1 + 1e-9).sum()}/{(a < b1 - 1e-9).sum()} |")
