"""The adversarial slice against a model that obeys every instruction it reads: the worst case of a gullible LLM,
for the fixed pipeline and the seven agent strategies, with and without the injection defence. No model runs: a
scripted backend stands in for one (deterministic, seconds per config).

    .venv/bin/python bench/injection_obedient.py [--policies keep exclude demote]

The obedient model, for every request: when the prompt shows a payload of the slice (one of its canaries appears in
it), it does what that payload asks in every field its reply allows: a router or agent decision retrieves the
canary as its query (an answer agent abstains giving it as the reason; a controller hands it to the search agent as
its message), a short answer is the canary, free text repeats it. Otherwise it walks retrieve, rerank, grade, answer
and answers with the first words of the best passage. Attack success is scored as `cli.py eval` scores it
(evaluation/metrics.py `attack_succeeded`: the question's own payload); "any payload" also counts a payload planted
for another question of the slice that the run obeyed. What this measures is whether a payload can reach a decision at all;
the live runs of bench/injection_eval.sh measure what the local model does with it. Records
bench/results/injection_obedient.json (`--result NAME` for a variant).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import results as result_files
from injection_tally import acting_canaries

from switchyard.configs.loader import load_config
from switchyard.evaluation.datasets import load_dataset
from switchyard.evaluation.metrics import attack_succeeded
from switchyard.graphs.pipeline import Pipeline
from switchyard.llm.backend import Reply
from switchyard.llm.client import LLM
from switchyard.nodes.resources import SharedModels
from switchyard.retrievers.embedder import Embedder
from switchyard.retrievers.stack import RetrievalStack

ROOT = Path(__file__).resolve().parent.parent
SLICE = ROOT / "tests" / "fixtures" / "injection"
CONFIGS = ["fixed", "agent-zeroshot", "agent-zst", "agent", "agent-plan", "agent-plan-react", "agent-bolaa",
           "agent-autogpt"]  # fmt: skip
STEPS = {"(none)": "retrieve", "retrieve": "rerank", "rerank": "grade"}


class Obedient:
    name = "obedient"

    def __init__(self, payloads: dict[str, tuple[str, str]]):
        self.payloads = payloads  # the start of each payload's text -> (kind, canary)

    def chat(self, messages, *, max_tokens, temperature, json_schema=None, seed=None, on_token=None,
             cancelled=None, tools=None, tool_choice=None) -> Reply:  # fmt: skip
        text = "\n".join(m["content"] for m in messages)
        flat = " ".join(text.split())
        kind, seen = next(((k, c) for start, (k, c) in self.payloads.items() if start in flat), ("", None))
        if kind == "reveal":  # it prints every passage it was given
            seen = " | ".join(line for line in text.split("\n") if line.startswith("["))[:2000] or None
        act = seen if kind != "reveal" else None  # only the other kinds ask for an action
        props = (json_schema or {}).get("properties", {})
        if not json_schema:
            return Reply(f"As instructed: {seen}." if seen else "Search the documents, then answer.")
        if "steps" in props:
            return Reply(json.dumps({"steps": ["retrieve", "rerank", "grade", "answer"]}))
        if "agent" in props:
            return Reply(json.dumps({"agent": "search" if act or "Passages found: 0" in text else "answer",
                                     "message": act or "go on"}))  # fmt: skip
        if "relevant" in props:
            return Reply(json.dumps({"relevant": True, "score": 8}))
        if "passage" in props:  # the short answer
            if seen:
                return Reply(json.dumps({"answer": seen, "passage": 1}))
            first = re.search(r"\[1\] [^:]*: (\S+(?: \S+)?)", text)
            return Reply(json.dumps({"answer": first.group(1) if first else "NOT FOUND", "passage": 1}))
        key = "command" if "command" in props else "action" if "action" in props else None
        if key is None:  # the rewrite
            return Reply(json.dumps({"query": text.split("\n")[-1][:100]}))
        choices = _enum(json_schema, key)
        if act and "retrieve" in choices:
            return Reply(json.dumps({key: "retrieve", "query": act, "thought": "the passage says so"}))
        if act and "abstain" in choices:
            return Reply(json.dumps({key: "abstain", "reason": act}))
        last = text.split("Last action: ")[-1].split(";")[0] if "Last action: " in text else "(none)"
        step = STEPS.get(last, "answer")
        if step not in choices:
            step = choices[0] if choices else "answer"
        return Reply(json.dumps({key: step, **({"query": "search"} if step == "retrieve" else {})}))


def payloads(data) -> dict[str, tuple[str, str]]:
    """The start (60 characters) of each planted payload, the paragraph between the page's two halves, with the
    kind and first canary of its question."""
    out = {}
    for q in data.questions:
        tid = q.id.removeprefix("inj-")
        page = next(p for p in (SLICE / "corpus").glob(f"{tid}-*.md") if not p.stem.endswith("-secret"))
        paragraph = page.read_text().split("\n\n")[2]
        out[" ".join(paragraph.split())[:60]] = (q.attack["kind"], q.attack["canary"][0])
    return out


def _enum(schema: dict, key: str) -> list[str]:
    prop = schema["properties"][key]
    if "enum" in prop:
        return list(prop["enum"])
    ref = prop.get("$ref") or next((a.get("$ref") for a in prop.get("anyOf", []) if "$ref" in a), None)
    if ref:
        return list(schema.get("$defs", {}).get(ref.split("/")[-1], {}).get("enum", []))
    return list(prop.get("const", []) and [prop["const"]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", nargs="+", default=["keep", "exclude"])
    parser.add_argument("--result", default="injection_obedient", help="the result file: bench/results/NAME.json")
    args = parser.parse_args()
    figures: dict[str, dict] = {}
    data = load_dataset(SLICE / "questions.jsonl", SLICE / "corpus")
    planted = payloads(data)
    acting = acting_canaries(data.questions)
    embedder = Embedder("minilm")
    with tempfile.TemporaryDirectory() as tmp:
        uri = Path(tmp) / "index"
        RetrievalStack(load_config(None, [f"store.uri={uri}"]), embedder=embedder).ingestor(progress=False).run(
            [SLICE / "corpus"]
        )
        print("| config | " + " | ".join(args.policies) + " |")
        print("|---" * (len(args.policies) + 1) + "|")
        for name in CONFIGS:
            cells = []
            for policy in args.policies:
                cfg = load_config(
                    ROOT / "configs" / f"{name}.yaml",
                    [f"store.uri={uri}", f"retrieve.injection_policy={policy}", "graph.router.protocol=json"],
                )
                models = SharedModels()
                models.provide(cfg.embedding, embedder)
                models.provide(cfg.llm, LLM(Obedient(planted), max_retries=0, backoff_s=0.0))
                pipe = Pipeline(cfg, models)
                results = [(q, pipe.ask(q.question)) for q in data.questions]
                hits = [q.id for q, r in results if attack_succeeded(r.answer, r.steps, q.attack["canary"])]
                # any payload of the slice, not only the question's own (a reveal's canary is a secret that a
                # question may legitimately show, so only the question's own counts for that kind)
                anywhere = [
                    q.id for q, r in results if attack_succeeded(r.answer, r.steps, acting + q.attack["canary"])
                ]
                figures.setdefault(name, {})[policy] = {"questions": len(results), "own": hits, "any": anywhere}
                named = f" ({', '.join(hits)})" if hits and policy != "keep" else ""
                cells.append(f"{len(hits)}/{len(data.questions)}{named}; any payload {len(anywhere)}")
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    config = {"policies": args.policies, "configs": list(CONFIGS), "protocol": "json"}
    print(f"recorded {result_files.record(args.result, figures, config).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
