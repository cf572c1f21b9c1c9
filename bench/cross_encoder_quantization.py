"""Does int8 keep a cross-encoder's ranking? Exports one model three times with `export_cross_encoder` (float32,
int8 weights, int8 dynamic) and compares their scores on SciFact TRAIN claims (never a test query).

    .venv/bin/python bench/cross_encoder_quantization.py MODEL_FOLDER [--queries 40] [--candidates 20]

MODEL_FOLDER is a sentence-transformers CrossEncoder folder (e.g. what bench/train_reranker.py trains). Each claim
gets its first relevant abstract and `--candidates - 1` abstracts drawn at random (seeded). Prints each file's size
and scoring time, and for each int8 file the per-claim Spearman correlation of its scores with the float32 ones
(mean, min), how often the top-1 is the same, the mean overlap of the top 5, its error relative to the score spread
(std of the difference / std of the float32 scores, per claim), and the MRR of the relevant abstract under each
file (a sanity check of the model, not a benchmark).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
from common import ROOT, SHARED

from switchyard.retrievers.cross_encoder_onnx import OnnxCrossEncoder, export_cross_encoder


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="a sentence-transformers CrossEncoder folder")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--scifact", type=Path, default=SHARED / "scifact")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "cross-encoder-quantization")
    args = parser.parse_args()

    texts = {}
    for line in (args.scifact / "corpus.jsonl").open():
        doc = json.loads(line)
        texts[doc["_id"]] = doc["text"]
    claims = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()}
    relevant: dict[str, str] = {}
    for line in (args.scifact / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, doc_id, _ = line.split("\t")
        relevant.setdefault(qid, doc_id)
    rng = random.Random(0)
    qids = rng.sample(sorted(relevant), args.queries)
    ids = sorted(texts)
    groups = []
    for qid in qids:
        others = [d for d in rng.sample(ids, args.candidates) if d != relevant[qid]][: args.candidates - 1]
        groups.append([(claims[qid], texts[d]) for d in [relevant[qid], *others]])

    scores = {}
    for kind, quantize in (("fp32", False), ("int8-weights", "weights"), ("int8-dynamic", "dynamic")):
        path = args.out / f"{kind}.onnx"
        export_cross_encoder(args.model, path, max_length=args.max_length, quantize=quantize)
        model = OnnxCrossEncoder(path, threads=args.threads)
        model.warm_up()
        t = time.perf_counter()
        scores[kind] = np.stack([model.predict(g) for g in groups])
        took = time.perf_counter() - t
        mrr = float(np.mean([1 / (1 + int((s[1:] > s[0]).sum())) for s in scores[kind]]))
        print(f"{kind}: {path.stat().st_size / 1e6:.1f} MB, {took:.1f} s for {scores[kind].size} pairs, MRR {mrr:.3f}")
    ref = scores["fp32"]
    for kind in ("int8-weights", "int8-dynamic"):
        q = scores[kind]
        rho = [spearman(a, b) for a, b in zip(ref, q)]
        top1 = float(np.mean(ref.argmax(1) == q.argmax(1)))
        top5 = float(np.mean([len(set(np.argsort(-a)[:5]) & set(np.argsort(-b)[:5])) / 5 for a, b in zip(ref, q)]))
        noise = float(np.mean(np.std(q - ref, axis=1) / np.std(ref, axis=1)))
        print(
            f"{kind} vs fp32 over {len(groups)} claims x {args.candidates}: Spearman mean {np.mean(rho):.4f} "
            f"min {np.min(rho):.4f}; same top-1 {top1:.3f}; top-5 overlap {top5:.3f}; error/spread {noise:.3f}"
        )


if __name__ == "__main__":
    main()
