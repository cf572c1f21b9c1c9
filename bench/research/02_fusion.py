"""Fusion tuning on TRAIN (809 queries); the best settings of each family are then reported on TEST.

Families: convex (min-max) with w_bm25 0.2..0.8; RRF with k in {5..100} and weights; per-retriever depth
50/100/200; and a 'doc-level' variant (each retriever's chunk list collapsed to documents by best chunk before
fusing; not what the project does today). Prints train/test nDCG@10 and Recall@100.
"""
import itertools
import json

import numpy as np

from common import CACHE, fuse_lists, load_runs, score_rankings, splits

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
S = splits()


def doc_level(lst):
    seen, out = set(), []
    for cid, s in lst:
        d = doc_of[cid]
        if d not in seen:
            seen.add(d)
            out.append((d, s))
    return out


DOCRUNS = {n: {q: doc_level(l) for q, l in r.items()} for n, r in runs.items()}


def evaluate(split, method, wb, k=60.0, depth=(200, 200), level="chunk"):
    qrels = S[split]
    src = runs if level == "chunk" else DOCRUNS
    rankings = {}
    for q in qrels:
        lists = {"bm25": src["bm25"][q], "dense": src["dense"][q]}
        fused = fuse_lists(lists, method, {"bm25": wb, "dense": 1 - wb}, k, {"bm25": depth[0], "dense": depth[1]})
        ids = [c for c, _ in fused]
        rankings[q] = [doc_of[c] for c in ids] if level == "chunk" else ids
    return score_rankings(rankings, qrels)


if __name__ == "__main__":
    # sanity: the project's fuse() on test, convex 0.5/0.5, must equal our reimplementation
    from retrievers.documents import Passage
    from retrievers.fusion import fuse

    qrels = S["test"]
    rk = {}
    for q in qrels:
        ps = {n: [Passage(chunk_id=c, doc_id=doc_of[c], source="", title="", text="", score=s) for c, s in runs[n][q]]
              for n in ("bm25", "dense")}
        rk[q] = [p.doc_id for p in fuse(ps, "convex", {"bm25": 0.5, "dense": 0.5})]
    print("project fuse convex .5/.5 test", score_rankings(rk, qrels), "ours", evaluate("test", "convex", 0.5))
    for n in ("bm25", "dense"):
        for sp in ("train", "test"):
            print(n, sp, score_rankings({q: [doc_of[c] for c, _ in runs[n][q]] for q in S[sp]}, S[sp]))

    depths = [(50, 50), (100, 100), (200, 200), (100, 200), (200, 100), (50, 200), (200, 50)]
    results = []
    for level in ("chunk", "doc"):
        for d in depths:
            for wb in np.round(np.arange(0.2, 0.801, 0.05), 2):
                results.append(dict(method="convex", wb=float(wb), k=None, depth=d, level=level,
                                    **evaluate("train", "convex", wb, depth=d, level=level)))
            for k, wb in itertools.product([5, 10, 20, 30, 60, 100], [0.3, 0.4, 0.5, 0.6, 0.7]):
                results.append(dict(method="rrf", wb=wb, k=k, depth=d, level=level,
                                    **evaluate("train", "rrf", wb, k, depth=d, level=level)))
    (CACHE / "fusion_grid_train.json").write_text(json.dumps(results))
    print("\nTop train settings per family (then their TEST figures):")
    print("| family | level | depth bm25/dense | w_bm25 | rrf_k | train nDCG@10 | train R@100 | test nDCG@10 | test R@100 |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = [dict(method="convex", wb=0.5, k=None, depth=(200, 200), level="chunk", tag="baseline")]
    for (m, lv) in itertools.product(("convex", "rrf"), ("chunk", "doc")):
        fam = sorted([r for r in results if r["method"] == m and r["level"] == lv], key=lambda r: -r["ndcg@10"])
        rows += [dict(fam[0], tag="best")] + [dict(fam[i], tag=f"#{i+1}") for i in (1, 2)]
    for r in rows:
        tr = evaluate("train", r["method"], r["wb"], r["k"] or 60, r["depth"], r["level"])
        te = evaluate("test", r["method"], r["wb"], r["k"] or 60, r["depth"], r["level"])
        print(f"| {r['method']} ({r['tag']}) | {r['level']} | {r['depth'][0]}/{r['depth'][1]} | {r['wb']} | {r['k']} | "
              f"{tr['ndcg@10']:.4f} | {tr['recall@100']:.4f} | {te['ndcg@10']:.4f} | {te['recall@100']:.4f} |")
    # smoothness: the convex curve at depth 200/200 chunk level
    print("\nconvex chunk 200/200 train curve:",
          [(r["wb"], round(r["ndcg@10"], 4)) for r in results
           if r["method"] == "convex" and r["level"] == "chunk" and tuple(r["depth"]) == (200, 200)])
    print("rrf chunk 200/200 train (k, wb, ndcg):",
          sorted([(r["k"], r["wb"], round(r["ndcg@10"], 4)) for r in results
                  if r["method"] == "rrf" and r["level"] == "chunk" and tuple(r["depth"]) == (200, 200)],
                 key=lambda x: -x[2])[:8])
