"""Per-node latency of `ask` on the bundled sample corpus, and the pipeline's own overhead.

    .venv/bin/python bench/ask_latency.py --runs 3
    .venv/bin/python bench/ask_latency.py --config configs/no-llm.yaml --runs 1   # another pipeline
    .venv/bin/python bench/ask_latency.py --set rerank.method=cross_encoder --set rerank.model=FILE.onnx

The sample corpus (samples/corpus) is ingested into a temporary index; the models are loaded and warmed with one
question, then the SAMPLE_QUESTIONS of bench/common.py (8) are asked --runs times, the query-vector cache cleared
before each. Overhead = everything except time inside LLM calls (retrieval, reranking, grading, citation
checking, graph bookkeeping). Target: overhead p50 <= 100 ms on 2 cores.

Prints a table of calls and p50 / p95 ms per node, then the per-question total, the time inside the LLM and the
pipeline overhead (p50 / p95), and records them in bench/results/ask_latency.json (`--result NAME` for a variant;
docs/benchmarks.md's table is generated from it: python -m bench report). Writes the resolved config to --out
(default bench/out/ask/config.resolved.yaml).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import results
from common import ROOT, SAMPLE_QUESTIONS, write_resolved_config

from switchyard.configs.loader import load_config
from switchyard.evaluation.ranking import percentile
from switchyard.graphs.pipeline import Pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "fixed.yaml"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "ask"))
    parser.add_argument(
        "--result", default="ask_latency", help="the result file's name, bench/results/NAME.json (a variant: its own)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(args.config, [*args.set, f"store.uri={tmp}/index"])
        write_resolved_config(config, Path(args.out))
        pipe = Pipeline(config)
        pipe.resources.stack.ingestor(progress=False).run([ROOT / "samples" / "corpus"])
        pipe.ask(SAMPLE_QUESTIONS[0])  # warm-up: loads the models
        per_node: dict[str, list[float]] = {}
        totals, overheads, llm_ms = [], [], []
        for _ in range(args.runs):
            for q in SAMPLE_QUESTIONS:
                pipe.resources.embedder.clear_cache()  # no help from an earlier run of the same question
                result = pipe.ask(q)
                for e in result.trace:
                    per_node.setdefault(e.node, []).append(e.ms)
                totals.append(result.usage.total_ms)
                llm_ms.append(result.usage.llm_ms)
                overheads.append(result.usage.total_ms - result.usage.llm_ms)
    print(f"config: {args.config}; {len(totals)} questions")
    print("| node | calls | p50 ms | p95 ms |\n|---|---|---|---|")
    for node, times in per_node.items():
        print(f"| {node} | {len(times)} | {percentile(times, 50):.1f} | {percentile(times, 95):.1f} |")
    print(f"total per question: p50 {percentile(totals, 50):.0f} ms, p95 {percentile(totals, 95):.0f} ms")
    print(f"inside LLM calls:   p50 {percentile(llm_ms, 50):.0f} ms")
    print(
        f"pipeline overhead (total - LLM): p50 {percentile(overheads, 50):.1f} ms, "
        f"p95 {percentile(overheads, 95):.1f} ms (target p50 <= 150 ms)"
    )
    figures = {
        "questions": len(totals),
        "nodes": {
            n: {"calls": len(t), "p50_ms": percentile(t, 50), "p95_ms": percentile(t, 95)} for n, t in per_node.items()
        },
        **{
            k: {"p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95)}
            for k, v in (("total", totals), ("llm", llm_ms), ("overhead", overheads))
        },
    }
    run = {"config_file": args.config, "overrides": args.set, "runs": args.runs}
    print(f"wrote {results.record(args.result, figures, {**run, 'resolved': config.model_dump(mode='json')})}")


if __name__ == "__main__":
    main()
