"""Second-stage reranking of the fused list, in the project's way: rerank the first K fused CHUNKS, append the rest,
dedupe to documents. Mix = (1-w) * minmax(fused) + w * minmax(second score) over the K candidates.

Second opinions (all from cached vectors, no encoding at evaluation time):
  docmean  cosine(query, mean of the document's MiniLM chunk vectors)  ("whole-document" MiniLM, free)
  ft       cosine under the fine-tuned MiniLM (04_finetune.py) of the chunk ("title\\nchunk")
  ftdoc    max over the document's chunks of the fine-tuned cosine
Also: a learned reranker (logistic regression on fusion features; 5-fold CV grouped by query on TRAIN picks C),
and the fine-tuned model as a first-stage dense retriever (replacing / added to MiniLM).

Tuning: docmean/LTR on TRAIN (809); anything using the fine-tuned model on DEV (150 train queries held out from
fine-tuning). Report on TEST.
"""
import itertools
import json

import numpy as np

from common import CACHE, fuse_lists, load_runs, minmax, score_rankings, splits

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
cids = meta["chunk_id"]
cidx = {c: i for i, c in enumerate(cids)}
qids_all = json.loads((CACHE / "qids.json").read_text())
qpos = {q: i for i, q in enumerate(qids_all)}
QV, CV = np.load(CACHE / "qvec_minilm.npy"), np.load(CACHE / "chunk_vec_minilm.npy")
S = splits()
HAVE_FT = (CACHE / "chunk_vec_ft.npy").exists()
if HAVE_FT:
    QF, CF = np.load(CACHE / "qvec_ft.npy"), np.load(CACHE / "chunk_vec_ft.npy")
    sp_ = json.loads((CACHE / "ft_split.json").read_text())
    S["dev"] = {q: S["train"][q] for q in sp_["dev"]}
WB = 0.55
doc_chunks = {}
for i, d in enumerate(meta["doc_id"]):
    doc_chunks.setdefault(d, []).append(i)
DOCMEAN = {d: (lambda v: v / np.linalg.norm(v))(CV[ix].mean(0)) for d, ix in doc_chunks.items()}

FUSED = {q: fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": WB, "dense": 1 - WB})
         for q in qids_all}


def second(kind, q, head):
    if kind == "docmean":
        return np.array([DOCMEAN[doc_of[c]] @ QV[qpos[q]] for c, _ in head])
    if kind == "ft":
        return CF[[cidx[c] for c, _ in head]] @ QF[qpos[q]]
    if kind == "ftdoc":
        return np.array([(CF[doc_chunks[doc_of[c]]] @ QF[qpos[q]]).max() for c, _ in head])
    raise ValueError(kind)


def rerank(q, kind, K, w):
    f = FUSED[q]
    head = f[:K]
    mix = (1 - w) * minmax([s for _, s in head]) + w * minmax(second(kind, q, head))
    order = sorted(range(len(head)), key=lambda i: (-mix[i], head[i][0]))
    return [doc_of[head[i][0]] for i in order] + [doc_of[c] for c, _ in f[K:]]


def ev(split, fn):
    return score_rankings({q: fn(q) for q in S[split]}, S[split])


def row(name, tune_split, fn):
    tr = ev(tune_split, fn)
    te = ev("test", fn)
    print(f"| {name} | {tune_split} | {tr['ndcg@10']:.4f} | {tr['recall@100']:.4f} | {te['ndcg@10']:.4f} | "
          f"{te['recall@100']:.4f} |", flush=True)


def tune(kind, split):
    best = None
    for K, w in itertools.product([10, 20, 30, 50], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0]):
        r = ev(split, lambda q: rerank(q, kind, K, w))["ndcg@10"]
        if best is None or r > best[0]:
            best = (r, K, w)
    return best


print("| method | tuned on | tune nDCG@10 | tune R@100 | test nDCG@10 | test R@100 |\n|---|---|---|---|---|---|")
row("fusion convex 0.55 (no rerank)", "train", lambda q: [doc_of[c] for c, _ in FUSED[q]])
if HAVE_FT:
    row("fusion convex 0.55 (no rerank)", "dev", lambda q: [doc_of[c] for c, _ in FUSED[q]])

r, K, w = tune("docmean", "train")
row(f"rescore MiniLM doc-mean K={K} w={w}", "train", lambda q: rerank(q, "docmean", K, w))

if HAVE_FT:
    for kind in ("ft", "ftdoc"):
        r, K, w = tune(kind, "dev")
        row(f"rescore fine-tuned MiniLM [{kind}] K={K} w={w}", "dev", lambda q: rerank(q, kind, K, w))
        for K2, w2 in [(20, 0.5), (20, 0.7), (30, 0.6)]:
            row(f"  fixed K={K2} w={w2} [{kind}]", "dev", lambda q: rerank(q, kind, K2, w2))

    # fine-tuned model as first-stage dense retriever
    def ft_dense(q, k=200):
        s = CF @ QF[qpos[q]]
        top = np.argpartition(-s, k)[:k]
        top = top[np.argsort(-s[top])]
        return [(cids[i], float(s[i])) for i in top]
    FT = {q: ft_dense(q) for q in qids_all}
    row("fine-tuned dense alone", "dev", lambda q: [doc_of[c] for c, _ in FT[q]])
    best = None
    for wb in (0.2, 0.3, 0.4, 0.5, 0.6):
        r = ev("dev", lambda q: [doc_of[c] for c, _ in fuse_lists({"bm25": runs["bm25"][q], "dense": FT[q]},
                                                                  "convex", {"bm25": wb, "dense": 1 - wb})])["ndcg@10"]
        best = max(best or (0,), (r, wb))
    wb = best[1]
    row(f"BM25 + fine-tuned dense convex w_bm25={wb}", "dev",
        lambda q: [doc_of[c] for c, _ in fuse_lists({"bm25": runs["bm25"][q], "dense": FT[q]}, "convex",
                                                    {"bm25": wb, "dense": 1 - wb})])
    best = None
    for wb, wf in itertools.product((0.3, 0.4, 0.5), (0.3, 0.4, 0.5, 0.6)):
        wd = max(0.0, 1 - wb - wf)
        r = ev("dev", lambda q: [doc_of[c] for c, _ in fuse_lists(
            {"bm25": runs["bm25"][q], "dense": runs["dense"][q], "ft": FT[q]}, "convex",
            {"bm25": wb, "dense": wd, "ft": wf})])["ndcg@10"]
        best = max(best or (0,), (r, wb, wf))
    _, wb, wf = best
    row(f"3-way convex bm25={wb} minilm={round(1-wb-wf,2)} ft={wf}", "dev", lambda q: [doc_of[c] for c, _ in fuse_lists(
        {"bm25": runs["bm25"][q], "dense": runs["dense"][q], "ft": FT[q]}, "convex",
        {"bm25": wb, "dense": max(0.0, 1 - wb - wf), "ft": wf})])
