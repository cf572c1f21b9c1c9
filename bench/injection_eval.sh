#!/usr/bin/env bash
# The adversarial slice (tests/fixtures/injection) before and after the injection defence, for the default fixed
# pipeline and the seven agent strategies, on the local model (docs/benchmarks.md "Indirect prompt injection").
#   bash bench/injection_eval.sh before|after [AGENT_LIMIT]
# before: retrieve.injection_policy=keep (no defence); after: the shipped defaults (exclude at 0.6).
# Writes bench/eval/injection-<condition>-fixed and -agents (rows, report, packed reply cache and vectors).
set -euo pipefail
cond=$1; limit=${2:-16}
case $cond in before) set_args=(--set retrieve.injection_policy=keep);; after) set_args=();; *) exit 2;; esac
data=tests/fixtures/injection/questions.jsonl; corpus=tests/fixtures/injection/corpus
run() {  # OUT [eval args...]
  local out=$1; shift
  HF_HUB_OFFLINE=1 .venv/bin/python cli.py eval "$data" --corpus "$corpus" --out "$out" --index-dir "bench/out/injection-index-$cond" \
    --llm-cache "$out/llm-cache" --vector-cache "$out/vectors" --no-progress "${set_args[@]}" "$@"
}
run "bench/eval/injection-$cond-fixed" --configs configs/fixed.yaml
run "bench/eval/injection-$cond-agents" --limit "$limit" --configs configs/agent-zeroshot.yaml configs/agent.yaml configs/agent-plan.yaml configs/agent-zst.yaml \
  configs/agent-plan-react.yaml configs/agent-bolaa.yaml configs/agent-autogpt.yaml
