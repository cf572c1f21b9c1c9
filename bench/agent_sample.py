"""Fixed pipeline vs the three agent strategies on the bundled sample, with the embedded local model.

    python bench/agent_sample.py

A smoke-level comparison (8 questions, 1 run each; the evaluation harness does the real one): answered vs
abstained, router steps, guard activations, LLM calls and latency per question.
"""
from __future__ import annotations

import tempfile
from collections import Counter

from _common import ROOT, write_resolved_config
from ask_latency import QUESTIONS

from configs.loader import load_config
from graphs.app import Pipeline
from nodes.resources import Resources
from retrievers.metrics import percentile

CONFIGS = ["fixed.yaml", "agent.yaml", "agent-zeroshot.yaml", "agent-plan.yaml"]


def main() -> None:
    shared = None
    with tempfile.TemporaryDirectory() as tmp:
        print("| config | answered | abstained | steps/q | guards | LLM calls/q | p50 s | p95 s |")
        print("|---|---|---|---|---|---|---|---|")
        for name in CONFIGS:
            config = load_config(ROOT / "configs" / name, [f"store.uri={tmp}/index"])
            write_resolved_config(config, ROOT / "bench" / "out" / "agent_sample" / name.removesuffix(".yaml"))
            if shared is None:
                res = Resources(config)
                res.stack.ingestor(progress=False).run([ROOT / "samples" / "corpus"])
                shared = res
            else:  # one model load for every config
                res = Resources(config, llm=shared.llm, embedder=shared.stack.embedder)
            pipe = Pipeline(config, res)
            rows = [pipe.ask(q) for q in QUESTIONS]
            guards = Counter(g for r in rows for g, n in r["failures"]["guards"].items() for _ in range(n))
            secs = [r["usage"]["total_ms"] / 1e3 for r in rows]
            print(f"| {name} | {sum(not r['abstained'] for r in rows)} | {sum(r['abstained'] for r in rows)} | "
                  f"{sum(len(r['steps']) for r in rows) / len(rows):.1f} | "
                  f"{', '.join(f'{k} {v}' for k, v in sorted(guards.items())) or '-'} | "
                  f"{sum(r['usage']['llm_calls'] for r in rows) / len(rows):.1f} | "
                  f"{percentile(secs, 50):.1f} | {percentile(secs, 95):.1f} |")


if __name__ == "__main__":
    main()
