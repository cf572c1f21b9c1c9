"""Ingestion throughput per embedding backend, side by side on the same texts, and each backend's SciFact nDCG@10.

    .venv/bin/python bench/ingest_throughput.py            # 1,000 SciFact abstracts, torch,onnx,openvino, 2 rounds
    .venv/bin/python bench/ingest_throughput.py --docs 500 --rounds 1 --backends torch,openvino --no-ndcg
    .venv/bin/python bench/ingest_throughput.py --docs 500 --rounds 1 --backends torch,openvino --no-ndcg \\
        --set ingest.window_tokens=0                       # one vector per chunk (no sentence windows)
    .venv/bin/python bench/ingest_throughput.py --docs 500 --backends torch,openvino,openvino+e5 --no-ndcg

Options: [--docs 1000] [--backends torch,onnx,openvino] [--threads 2] [--rounds 2] [--ndcg-limit N | --no-ndcg]
[--set KEY=VALUE ...] [--out bench/out/ingest] [--result ingest_throughput]. A backend is `name` or `name:precision` (see embedding.precision),
optionally with `+e5`: the same runtime for both models with retrieve.retrievers.e5 on (configs/e5.yaml), so a
collection also gets e5 vectors; its embed-only figure times both models on the chunk texts.
Every backend is loaded first (the ONNX export, if missing from the cache, is built then and its time shown as load
time); then each round ingests the same SciFact abstracts into a fresh index through every backend in turn
(interleaved, so a load change on a shared machine hits all of them alike), and the best round per backend counts.
Per backend: full-ingest chunks/s (load, clean, chunk, embed, write, FTS index), embedding-only chunks/s of the same
chunk texts, ingest overhead, the ratio to torch and the cosine of its vectors to torch's. Then SciFact test
nDCG@10 (dense and hybrid) through each backend (evaluation.retrieval.evaluate, a full ingest of the 5,183
abstracts each). The bar for making a backend the default: >= 2x torch's full-ingest chunks/s and
|nDCG@10 - torch| <= 0.005 (dense and hybrid).

Prints progress, a Markdown table (one row per backend), whether the bar is met, and as its last line
`speedup_vs_torch: <best ratio>` (full-ingest chunks/s of the fastest backend over torch's). Writes
--out/results.json, --out/config.resolved.yaml and the figures to bench/results/RESULT.json (the docs' tables).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import results
from common import ROOT, SHARED, e5_overrides, load_average, scifact_docs, write_resolved_config

from switchyard.configs.loader import load_config
from switchyard.retrievers.documents import search_text
from switchyard.retrievers.e5_model import PASSAGE_PREFIX
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import ALL

SPEEDUP_BAR, NDCG_TOLERANCE = 2.0, 0.005


def overrides(backend: str, threads: int) -> list[str]:
    runtime, _, extra = backend.partition("+")
    name, _, precision = runtime.partition(":")
    return [
        f"embedding.backend={name}",
        f"embedding.precision={precision or 'auto'}",
        f"embedding.threads={threads}",
        *(e5_overrides() if extra == "e5" else []),
    ]


def load_note(load: list[float]) -> str:
    """`load` (common.load_average: the 1- and 5-minute averages) as the progress lines print it."""
    return f"load average {load[0]:.2f} (1 min) / {load[1]:.2f} (5 min) on {os.cpu_count()} CPUs"


def throughput(args, backends: list[str], out: Path) -> dict[str, dict]:
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("\n".join(json.dumps(d) for d in scifact_docs(args.docs)))
        configs = {
            b: load_config(None, [f"store.uri={tmp}/index", *overrides(b, args.threads), *args.overrides])
            for b in backends
        }
        write_resolved_config(configs[backends[-1]], out)
        embedders, e5_embedders, stats = {}, {}, {}
        for b in backends:
            t = time.perf_counter()
            loaded = RetrievalStack(configs[b])
            embedders[b] = loaded.embedder
            embedders[b].run(["warm-up"])
            if configs[b].retrieve.retrievers.e5.enabled:
                e5_embedders[b] = loaded.field_embedder("e5")
                e5_embedders[b].run(["warm-up"])
            stats[b] = {
                "load_s": time.perf_counter() - t,
                "precision": embedders[b].inference_precision,
                "ingest": [],
                "embed": [],
            }
            print(f"loaded {b:14s} in {stats[b]['load_s']:5.1f} s ({stats[b]['precision']})", flush=True)

        texts: list[str] = []
        for r in range(args.rounds):
            for b in backends:
                cfg = configs[b].model_copy(deep=True)
                cfg.store.uri = f"{tmp}/index-{r}-{b.replace(':', '-')}"
                stack = RetrievalStack(
                    cfg, embedder=embedders[b], field_embedders={"e5": e5_embedders[b]} if b in e5_embedders else None
                )
                t = time.perf_counter()
                report = stack.ingestor(progress=False).run([corpus])
                seconds = time.perf_counter() - t
                stats[b]["ingest"].append(report.chunks_written / seconds)
                stats[b]["chunks"] = report.chunks_written
                if not texts:
                    texts = [
                        search_text(row["title"], row["text"])
                        for row in stack.store.scan(["title", "text"], scope=ALL).to_pylist()
                    ]
                print(
                    f"round {r + 1} {b:14s} ingest {report.chunks_written} chunks in {seconds:6.1f} s: "
                    f"{stats[b]['ingest'][-1]:6.1f} chunks/s",
                    flush=True,
                )

        vectors = {}
        for _r in range(args.rounds):
            for b in backends:
                t = time.perf_counter()
                vectors[b] = embedders[b].run(texts)
                if b in e5_embedders:
                    e5_embedders[b].run([PASSAGE_PREFIX + text for text in texts])
                stats[b]["embed"].append(len(texts) / (time.perf_counter() - t))
        for b in backends:
            ref = vectors[backends[0]]
            stats[b]["cos_min"] = float(np.min((vectors[b] * ref).sum(axis=1)))
            stats[b]["ingest_best"] = max(stats[b]["ingest"])
            stats[b]["embed_best"] = max(stats[b]["embed"])
    return stats


def ndcg(args, backends: list[str]) -> dict[str, dict]:
    from switchyard.evaluation.retrieval import evaluate

    folder = SHARED / "scifact"
    scores = {}
    for b in backends:
        config = load_config(None, overrides(b, args.threads) + ["rerank.method=none", *args.overrides])
        result = evaluate(config, folder, split="test", limit=args.ndcg_limit, progress=False)
        scores[b] = {name: result["results"][name]["ndcg@10"] for name in ("dense", "hybrid")}
        scores[b]["index_chunks_per_s"] = result["chunks"] / result["index_s"]
        print(
            f"SciFact test nDCG@10 {b:14s} dense {scores[b]['dense']:.4f}  hybrid {scores[b]['hybrid']:.4f}  "
            f"(indexed {result['chunks']} chunks at {scores[b]['index_chunks_per_s']:.1f} chunks/s)",
            flush=True,
        )
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="SciFact abstracts ingested per round")
    parser.add_argument(
        "--backends", default="torch,onnx,openvino", help="comma-separated, torch first (the reference)"
    )
    parser.add_argument("--threads", type=int, default=2, help="threads of every backend (torch included)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ndcg-limit", type=int, help="only the first N SciFact test queries")
    parser.add_argument("--no-ndcg", action="store_true", help="skip the SciFact nDCG@10 check")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "ingest"))
    parser.add_argument("--result", default="ingest_throughput", help="the result file's name: bench/results/NAME.json")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides for every backend (e.g. ingest.window_tokens=0: no sentence windows)",
    )
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or backends[0] != "torch":
        parser.error("--backends must start with torch (the reference)")

    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    load = {"start": load_average()}
    print(f"start: {load_note(load['start'])}", flush=True)
    stats = throughput(args, backends, out)
    scores = {} if args.no_ndcg else ndcg(args, backends)
    load["end"] = load_average()
    print(f"end: {load_note(load['end'])}")

    base = stats["torch"]
    print(
        f"\n{args.docs} SciFact abstracts, {base['chunks']} chunks, {args.threads} threads, best of {args.rounds} "
        "rounds"
    )
    print(
        "| backend | precision | load s | ingest chunks/s (rounds) | embed-only chunks/s | overhead | vs torch "
        "| min cos to torch | nDCG@10 dense | nDCG@10 hybrid |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    verdicts = {}
    for b in backends:
        s = stats[b]
        ratio = s["ingest_best"] / base["ingest_best"]
        nd = scores.get(b)
        deltas = [abs(nd[k] - scores["torch"][k]) for k in ("dense", "hybrid")] if nd else []
        verdicts[b] = (ratio, bool(deltas) and ratio >= SPEEDUP_BAR and max(deltas) <= NDCG_TOLERANCE)
        rounds = " / ".join(f"{x:.1f}" for x in s["ingest"])
        nd_cells = f"{nd['dense']:.4f} | {nd['hybrid']:.4f}" if nd else "- | -"
        print(
            f"| {b} | {s['precision']} | {s['load_s']:.1f} | **{s['ingest_best']:.1f}** ({rounds}) | "
            f"{s['embed_best']:.1f} | {100 * (1 - s['ingest_best'] / s['embed_best']):.0f}% | {ratio:.2f}x | "
            f"{s['cos_min']:.6f} | {nd_cells} |"
        )
    (out / "results.json").write_text(json.dumps({"stats": stats, "ndcg": scores, "args": vars(args)}, indent=1))
    others = [b for b in backends if b != "torch"]
    met = [b for b in others if verdicts[b][1]]
    figures = {
        "docs": args.docs,
        "threads": args.threads,
        "rounds": args.rounds,
        "overrides": args.overrides,
        "backends": {b: {**stats[b], "ndcg@10": scores.get(b)} for b in backends},
        "bar": {"speedup": SPEEDUP_BAR, "ndcg_tolerance": NDCG_TOLERANCE, "met_by": met},
        "load_average": load,
    }
    print(f"recorded {results.record(args.result, figures, vars(args)).relative_to(ROOT)}")
    if not others:
        print("speedup_vs_torch: 1.00")
        return
    best = max(others, key=lambda b: verdicts[b][0])
    print(
        f"bar (>= {SPEEDUP_BAR:g}x ingest chunks/s and nDCG@10 within {NDCG_TOLERANCE} of torch): "
        + (f"met by {', '.join(met)}" if met else "not met" + (" (nDCG not checked)" if args.no_ndcg else ""))
    )
    print(f"speedup_vs_torch: {verdicts[best][0]:.2f}")


if __name__ == "__main__":
    main()
