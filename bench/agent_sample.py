"""Fixed pipeline vs the three agent strategies on the bundled sample, with the embedded local model.

    .venv/bin/python bench/agent_sample.py

A smoke-level comparison (the SAMPLE_QUESTIONS of bench/common.py, 8 questions, 1 run each; the evaluation harness,
`cli.py eval`, does the real one) of configs/fixed.yaml, agent.yaml, agent-zeroshot.yaml and agent-plan.yaml over
the sample corpus (samples/corpus) in a temporary index, one model load shared by all four.

Prints one table row per config: answered vs abstained, router steps per question, guard activations, LLM calls
per question and p50 / p95 seconds. Writes each resolved config to bench/out/agent_sample/<config>/.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter

from common import ROOT, SAMPLE_QUESTIONS, write_resolved_config

from switchyard.configs.loader import load_config
from switchyard.evaluation.ranking import percentile
from switchyard.graphs.pipeline import Pipeline
from switchyard.nodes.resources import SharedModels

CONFIGS = ["fixed.yaml", "agent.yaml", "agent-zeroshot.yaml", "agent-plan.yaml"]


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    models, ingested = SharedModels(), False  # one model load for every config
    with tempfile.TemporaryDirectory() as tmp:
        print("| config | answered | abstained | steps/q | guards | LLM calls/q | p50 s | p95 s |")
        print("|---|---|---|---|---|---|---|---|")
        for name in CONFIGS:
            config = load_config(ROOT / "configs" / name, [f"store.uri={tmp}/index"])
            write_resolved_config(config, ROOT / "bench" / "out" / "agent_sample" / name.removesuffix(".yaml"))
            pipe = Pipeline(config, models)
            if not ingested:
                pipe.resources.stack.ingestor(progress=False).run([ROOT / "samples" / "corpus"])
                ingested = True
            rows = [pipe.ask(q) for q in SAMPLE_QUESTIONS]
            guards = Counter(g for r in rows for g, n in r.failures.guards.items() for _ in range(n))
            secs = [r.usage.total_ms / 1e3 for r in rows]
            print(
                f"| {name} | {sum(not r.abstained for r in rows)} | {sum(r.abstained for r in rows)} | "
                f"{sum(len(r.steps) for r in rows) / len(rows):.1f} | "
                f"{', '.join(f'{k} {v}' for k, v in sorted(guards.items())) or '-'} | "
                f"{sum(r.usage.llm_calls for r in rows) / len(rows):.1f} | "
                f"{percentile(secs, 50):.1f} | {percentile(secs, 95):.1f} |"
            )


if __name__ == "__main__":
    main()
