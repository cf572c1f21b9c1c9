"""Cross-encoder reranking cost on this machine: load time, memory, and latency per query for N candidates.

    .venv/bin/python bench/rerank_latency.py MODEL.onnx [--sha256 HEX] [--n 10 20 50] [--queries 50] [--threads 2]

MODEL is a `cross-encoder-onnx/1` file (retrievers/cross_encoder_onnx.py; e.g. what bench/train_reranker.py writes)
or a sentence-transformers CrossEncoder folder. Each timed query reranks N SciFact abstracts (realistic passage
lengths: most fill the model's max_length) through `CrossEncoderReranker.run`, as the rerank node does; the passages
are drawn at random per query (seeded), so only their lengths matter, and no relevance is measured.

Prints the model's load time (including the sha256 check when --sha256 is given), the process RSS before and after
loading and its peak after the runs, and p50 / p95 / mean ms per query for each N, and records them in
bench/results/rerank_latency.json (`--result NAME` for a variant, e.g. another model).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import results
from common import SHARED, peak_rss_mb, rss_mb

from switchyard.evaluation.ranking import percentile
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.rerankers import CrossEncoderReranker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a cross-encoder .onnx file or a sentence-transformers CrossEncoder folder")
    parser.add_argument("--sha256", default=None, help="verify the file's digest on load (counted in load time)")
    parser.add_argument("--n", type=int, nargs="+", default=[10, 20, 50], help="candidates per query")
    parser.add_argument("--queries", type=int, default=50, help="timed queries per N")
    parser.add_argument("--warmup", type=int, default=3, help="untimed queries per N")
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--scifact", type=Path, default=SHARED / "scifact", help="a BEIR SciFact folder")
    parser.add_argument("--result", default="rerank_latency", help="the result file's name: bench/results/NAME.json")
    args = parser.parse_args()

    corpus = [json.loads(line) for line in (args.scifact / "corpus.jsonl").open()]
    texts = [c["text"] for c in corpus if c.get("text")]
    queries = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()]
    rng = random.Random(0)

    before = rss_mb()
    reranker = CrossEncoderReranker(
        args.model, top_k=max(args.n), batch_size=args.batch_size, threads=args.threads, sha256=args.sha256
    )
    t = time.perf_counter()
    reranker.warm_up()
    load_s = time.perf_counter() - t
    loaded = rss_mb()
    figures: dict = {
        "model": str(args.model),
        "size_mb": round(Path(args.model).stat().st_size / 1e6, 2) if Path(args.model).is_file() else None,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "load_s": round(load_s, 3),
        "rss_mb_before_load": round(before, 1),
        "rss_mb_after_load": round(loaded, 1),
        "latency_ms": {},
    }
    print(f"model {args.model}: load {load_s:.2f} s; RSS {before:.0f} MB -> {loaded:.0f} MB after loading")
    print(f"{'N':>4} {'p50 ms':>9} {'p95 ms':>9} {'mean ms':>9}  ({args.queries} queries, {args.threads} threads)")
    for n in args.n:
        times = []
        for i in range(args.warmup + args.queries):
            query = rng.choice(queries)
            passages = [
                Passage(chunk_id=f"c{j}", doc_id=f"d{j}", source="scifact", title="", text=text)
                for j, text in enumerate(rng.sample(texts, n))
            ]
            t = time.perf_counter()
            reranker.run(query, passages, top_k=n)
            if i >= args.warmup:
                times.append((time.perf_counter() - t) * 1000)
        row = {
            "p50": round(percentile(times, 50), 1),
            "p95": round(percentile(times, 95), 1),
            "mean": round(sum(times) / len(times), 1),
        }
        figures["latency_ms"][str(n)] = row
        print(f"{n:>4} {row['p50']:>9.1f} {row['p95']:>9.1f} {row['mean']:>9.1f}")
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(f"peak RSS {figures['peak_rss_mb']:.0f} MB")
    run = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "result"}
    print(f"wrote {results.record(args.result, figures, run)}")


if __name__ == "__main__":
    main()
