"""Cache BM25 + dense top-200 chunk runs for all 1,109 SciFact queries, the chunk table (ids, doc ids, vectors,
text) and the MiniLM query vectors. Uses the project's RetrievalStack on a copy of the ready index."""
import json
import time

import numpy as np

from common import CACHE, COLLECTION, DEPTH, INDEX_URI, load_queries

from configs.loader import load_config
from retrievers.pipeline import RetrievalStack

CACHE.mkdir(parents=True, exist_ok=True)
cfg = load_config(None, [f"store.uri={INDEX_URI}", f"retrieve.retrievers.bm25.top_k={DEPTH}",
                         f"retrieve.retrievers.dense.top_k={DEPTH}"])
stack = RetrievalStack(cfg, collection=COLLECTION)
queries = load_queries()

tbl = stack.store.scan(["chunk_id", "doc_id", "title", "text", "vector", "chunk_index"]).to_pylist()
tbl.sort(key=lambda r: (r["doc_id"], r["chunk_index"]))
meta = {"chunk_id": [r["chunk_id"] for r in tbl], "doc_id": [r["doc_id"] for r in tbl],
        "chunk_index": [r["chunk_index"] for r in tbl], "text": [r["text"] for r in tbl],
        "title": [r["title"] for r in tbl]}
(CACHE / "chunks_meta.json").write_text(json.dumps(meta))
np.save(CACHE / "chunk_vec_minilm.npy", np.array([r["vector"] for r in tbl], dtype=np.float32))
print("chunks", len(tbl))

bm25, dense = stack.bm25(), stack.dense()
qids = sorted(queries)
qv = stack.embedder.run([queries[q] for q in qids])
np.save(CACHE / "qvec_minilm.npy", qv)
(CACHE / "qids.json").write_text(json.dumps(qids))
runs = {"bm25": {}, "dense": {}}
t = time.perf_counter()
for i, q in enumerate(qids):
    runs["bm25"][q] = [(p.chunk_id, p.score) for p in bm25.run(queries[q])]
    runs["dense"][q] = [(p.chunk_id, p.score) for p in stack.store.vector_search(qv[i], DEPTH)]
print(f"runs for {len(qids)} queries in {time.perf_counter() - t:.1f}s")
(CACHE / "runs.json").write_text(json.dumps(runs))
