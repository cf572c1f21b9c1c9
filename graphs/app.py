"""The importable pipeline: `Pipeline(config).ask(question)` gives the same dict as `cli.py ask --json`.

`make_graph` is the entry point `langgraph.json` points LangGraph's own tooling at.
"""
from __future__ import annotations

from configs.loader import config_hash, config_to_dict, load_config
from configs.schema import SwitchyardConfig
from graphs.build import build_graph
from nodes.resources import Resources


class QuestionError(ValueError):
    pass


class Pipeline:
    def __init__(self, config: SwitchyardConfig | None = None, resources: Resources | None = None):
        self.config = config or load_config()
        self.resources = resources or Resources(self.config)
        self.graph = build_graph(self.config, self.resources)

    def check_ready(self) -> None:
        """Clear errors before any model loads: a missing or empty collection."""
        store = self.resources.stack.store
        if store.table().count_rows() == 0:
            raise QuestionError(f"collection {store.collection!r} is empty; run `cli.py ingest PATH` first")

    def ask(self, question: str, where: str | None = None) -> dict:
        if not question or not question.strip():
            raise QuestionError("the question is empty")
        if self.config.graph.mode != "closed_book":
            self.check_ready()
        failures_before = self.resources.llm_parse_failures()
        state = self.graph.invoke({"question": question.strip(), "where": where, "attempts": 0},
                                  config={"recursion_limit": self.config.graph.recursion_limit})
        failures = self.resources.llm_parse_failures() - failures_before
        steps = state.get("agent_steps", [])
        guards: dict[str, int] = {}
        for s in steps:
            if s.get("guard"):
                guards[s["guard"]] = guards.get(s["guard"], 0) + 1
        trace = state.get("trace", [])
        usage = state.get("usage", {})
        return {
            "question": question.strip(),
            "answer": state.get("answer", ""),
            "abstained": bool(state.get("abstained", False)),
            "citations": state.get("citations", []),
            "verdict": state.get("verdict"),
            "queries": state.get("query_history", []),
            "retrieved_doc_ids": list(dict.fromkeys(state.get("retrieved", []))),
            "citation_check": state.get("citation_check", {}),
            "trace": trace,
            "steps": steps,
            "failures": {"parse_fallbacks": failures, "guards": guards},
            "usage": usage,
            "config": {"hash": config_hash(self.config), "resolved": config_to_dict(self.config)},
        }


def make_graph(config: dict | None = None):
    """LangGraph CLI / Studio entry point: the compiled graph for the default config (models load on first use)."""
    return build_graph(load_config())
