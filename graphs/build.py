"""Builds the fixed LangGraph pipeline from a config:

    START -> rewrite -> retrieve -> rerank -> grade --relevant (correct/ambiguous)--> answer -> END
      |         ^                               |--retry (incorrect, retries left)--> rewrite
      |                                         '--exhausted (incorrect, none left)--> abstain -> END
      '--no_documents (small talk, arithmetic; graph.no_documents.detect)--> no_documents -> END

A question with earlier turns (`history`) goes through `contextualize` first (conversation.method; not drawn when
off), which writes the standalone question the later nodes read, then the same way (no_documents or rewrite).

Nodes are the plain functions in `nodes/`, `node(state, runtime, res) -> partial update`: `runtime` is LangGraph's
`Runtime[RunContext]` (per-run data: seed, cancellation, usage meters, the stream writer) and `res` the shared
`Resources` the graph was built with. Every node call appends a trace entry (duration, LLM calls and tokens,
input/output summary).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import replace
from functools import partial
from typing import Literal, cast

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from switchyard import tracing
from switchyard.configs.schema import SwitchyardConfig
from switchyard.graphs.state import RAGState
from switchyard.nodes.abstain import abstain
from switchyard.nodes.answer import abstention, answer
from switchyard.nodes.approve import approve, route_after_approval
from switchyard.nodes.citations import Citation
from switchyard.nodes.contextualize import contextualize
from switchyard.nodes.grade import GRADE_ROUTES, grade, route_after_grade
from switchyard.nodes.no_documents import no_documents, reply, route_question
from switchyard.nodes.rerank import rerank
from switchyard.nodes.resources import Resources
from switchyard.nodes.retrieve import retrieve
from switchyard.nodes.rewrite import rewrite
from switchyard.nodes.router import ACTIONS, FIXED_SEQUENCE, choose_edge, route
from switchyard.retrievers.documents import Passage
from switchyard.run_context import RunContext

Node = Callable[[dict, Runtime[RunContext], Resources], dict]
NODES: dict[str, Node] = {
    "rewrite": rewrite,
    "retrieve": retrieve,
    "rerank": rerank,
    "grade": grade,
    "answer": answer,
    "abstain": abstain,
}


# our own classes in a paused run's state: the checkpointer may load them back (LangGraph's msgpack allowlist)
CHECKPOINTED_TYPES = [(cls.__module__, cls.__name__) for cls in (Passage, Citation)]


def checkpoint_serde() -> JsonPlusSerializer:
    """The serializer for a paused run's checkpoints: LangGraph's own, loading back only its safe types and ours."""
    return JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINTED_TYPES)


def _summarize(value):
    if isinstance(value, list) and value and isinstance(value[0], Passage):
        return [f"{p.doc_id} ({p.score:.3f})" for p in value[:5]] + (
            [f"... {len(value) - 5} more"] if len(value) > 5 else []
        )
    if isinstance(value, list) and value and isinstance(value[0], Citation):
        return [f"[{c.n}] {c.title}" for c in value]
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "…"
    return value


_INPUT_KEYS = ("question", "queries", "attempts", "feedback", "candidates", "reranked", "graded", "verdict")


def traced(name: str, fn: Node, res: Resources) -> Callable[..., dict]:
    """The node LangGraph runs: `fn` with a usage meter of its own open on the run's context, plus one trace
    entry and one trace span (a child of the run's span). When the run is streamed, `node_start` goes out through
    LangGraph's stream writer."""

    def node(state: RAGState, runtime: Runtime[RunContext]) -> dict:
        if runtime.context is None:  # invoked without a context (e.g. LangGraph Studio): a fresh run's
            runtime = replace(runtime, context=RunContext())
        runtime.stream_writer({"event": "node_start", "node": name})
        values = cast(dict, state)  # what LangGraph passes: a plain dict, as nodes take it
        t = time.perf_counter()
        with (
            tracing.span(
                name, {tracing.SPAN_KIND: "CHAIN", "switchyard.node": name}, parent=runtime.context.trace_context
            ) as span,
            runtime.context.metered() as meter,
        ):
            update = fn(values, runtime, res)
            # a replayed call is counted only when there is one, so that records of model-made runs stay as before
            spent = {**meter.as_dict(), **({"cached_calls": meter.cached_calls} if meter.cached_calls else {})}
            if span.is_recording():
                span.set_attributes({f"switchyard.{k}": v for k, v in spent.items()})
        ms = (time.perf_counter() - t) * 1e3
        entry = {
            "node": name,
            "ms": round(ms, 2),
            **spent,
            "input": {k: _summarize(values[k]) for k in _INPUT_KEYS if k in values and values[k] not in ("", None)},
            "output": {k: _summarize(v) for k, v in update.items() if k not in ("query_history", "retrieved")},
        }
        return {**update, "trace": [entry], "usage": {**spent, "total_ms": round(ms, 2)}}

    node.__name__ = name
    return node


def _observation(name: str, update: dict) -> str:
    def best(key):
        items = update.get(key) or []
        return f"; best: {items[0].title}" if items else ""

    if name == "rewrite":
        return f"query: {update.get('query', '')}"
    if name == "retrieve":
        return f"{len(update.get('candidates', []))} passages{best('candidates')}"
    if name == "rerank":
        return f"{len(update.get('reranked', []))} passages kept{best('reranked')}"
    if name == "grade":
        return f"verdict {update.get('verdict')}, {len(update.get('graded', []))} relevant passages"
    if name == "reply":
        return f"replied directly: {update.get('answer', '')}"
    if update.get("abstained"):
        return f"abstained: {update.get('citation_check', {}).get('abstain_reason', '')}"
    return f"answered with {len(update.get('citations', []))} citation(s)"


def agent_action(name: str, fn: Node) -> Node:
    """The same node, with the router's arguments applied: rewrite/retrieve(query), abstain(reason); an answer
    without graded passages uses the reranked ones, running the rerank node over the retrieved ones when the agent
    skipped it (so an agent answers from the ranking the fixed pipeline uses), and the citation check still applies."""

    def run(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
        args = state.get("action_args") or {}
        query = args.get("query")
        if name == "rewrite" and query:
            update = {"queries": [query], "query": query, "query_history": [query]}
        elif name == "retrieve" and query:
            update = fn({**state, "queries": [query]}, runtime, res)
            update.update(queries=[query], query=query)
            if query not in state.get("query_history", []):
                update["query_history"] = [query]
        elif name == "answer" and not state.get("graded"):
            fallback = state.get("reranked") or (
                rerank(state, runtime, res)["reranked"] if state.get("candidates") else []
            )
            update = fn({**state, "graded": fallback}, runtime, res)
        elif name == "abstain" and args.get("reason"):
            update = abstention(res.config.answer.abstain_message, f"the agent abstained: {args['reason']}")
        else:
            update = fn(state, runtime, res)
        return {**update, "last_action": name}

    return run


def agent_step(name: str, fn: Node, res: Resources) -> Callable[..., dict]:
    """An action node in agent mode: traced like any node, plus one step record joining the router's decision."""
    node = traced(name, agent_action(name, fn), res)

    def step(state: RAGState, runtime: Runtime[RunContext]) -> dict:
        update = node(state, runtime)
        entry = update["trace"][0]
        record = {
            **state.get("decision", {}),
            "observation": _observation(name, update),
            "action_ms": entry["ms"],
            "action_llm_calls": entry["llm_calls"],
        }
        return {**update, "agent_steps": [record]}

    step.__name__ = name
    return step


def build_graph(
    config: SwitchyardConfig, resources: Resources | None = None, checkpointer: BaseCheckpointSaver | None = None
):
    """The compiled LangGraph for `config`: fixed edges, or (graph.mode: agent) an LLM router over the same nodes.
    With graph.router.approve the agent graph pauses before each action and keeps paused runs in `checkpointer`
    (default: in memory, for runs resumed by the same process)."""
    res = resources or Resources(config)
    if config.graph.mode == "agent":
        return _build_agent(config, res, checkpointer)
    if config.graph.mode == "closed_book":
        graph = StateGraph(RAGState, context_schema=RunContext)
        graph.add_node("answer", traced("answer", answer, res))
        graph.add_edge(START, "answer")
        graph.add_edge("answer", END)
        return graph.compile(name="switchyard-closed-book")
    graph = StateGraph(RAGState, context_schema=RunContext)
    for name, fn in NODES.items():
        graph.add_node(name, traced(name, fn, res))
    _add_entry(graph, config, FIXED_SEQUENCE[0], res)
    for before, after in zip(FIXED_SEQUENCE, FIXED_SEQUENCE[1:]):
        graph.add_edge(before, after)
    graph.add_conditional_edges(
        FIXED_SEQUENCE[-1],
        partial(route_after_grade, max_retries=config.grade.max_retries),
        GRADE_ROUTES,  # type: ignore[arg-type]  # LangGraph asks dict[Hashable, str], invariant
    )
    graph.add_edge("answer", END)
    graph.add_edge("abstain", END)
    return graph.compile(name=f"switchyard-{config.graph.mode}")


def _add_entry(
    graph: StateGraph[RAGState, RunContext, RAGState, RAGState],
    config: SwitchyardConfig,
    first: str,
    res: Resources,
    detect: bool | None = None,
) -> None:
    """START -> `first`; with graph.no_documents.detect (or `detect`), a question that needs no documents goes to
    `no_documents` instead (no retrieval, no LLM call). Unless conversation.method is off, a question with earlier
    turns goes through `contextualize` first, then the same way."""
    detect = config.graph.no_documents.detect if detect is None else detect
    routes: dict[Hashable, str] = {"documents": first}
    if detect:
        graph.add_node("no_documents", traced("no_documents", no_documents, res))
        graph.add_edge("no_documents", END)
        routes["no_documents"] = "no_documents"
    if config.conversation.method != "off":
        graph.add_node("contextualize", traced("contextualize", contextualize, res))
        graph.add_conditional_edges(START, partial(route_turn, detect=detect), {**routes, "turn": "contextualize"})
        start = "contextualize"
    else:
        start = START
    if detect:
        graph.add_conditional_edges(start, partial(route_question, detect=True), routes)
    else:
        graph.add_edge(start, first)


def route_turn(state: RAGState, detect: bool) -> Literal["turn", "documents", "no_documents"]:
    """A question with earlier turns goes through `contextualize`; one alone, as route_question sends it."""
    if state.get("history"):
        return "turn"
    return "no_documents" if route_question(cast(dict, state), detect) == "no_documents" else "documents"


def _build_agent(config: SwitchyardConfig, res: Resources, checkpointer: BaseCheckpointSaver | None):
    graph = StateGraph(RAGState, context_schema=RunContext)
    graph.add_node("router", traced("router", route, res))
    actions = ACTIONS + ("reply",) if config.graph.router.direct_reply else ACTIONS
    for name in actions:
        graph.add_node(name, agent_step(name, reply if name == "reply" else NODES[name], res))
    if config.graph.router.direct_reply:  # the agent decides what a question needing no documents gets
        _add_entry(graph, config, "router", res, detect=False)
        graph.add_edge("reply", END)
    else:
        _add_entry(graph, config, "router", res)
    if config.graph.router.approve:  # router -> approve (the run pauses) -> the action, or back after a rejection
        graph.add_node("approve", traced("approve", approve, res))
        graph.add_edge("router", "approve")
        graph.add_conditional_edges("approve", route_after_approval, {**{a: a for a in actions}, "router": "router"})
    else:
        graph.add_conditional_edges("router", choose_edge, {a: a for a in actions})
    for name in FIXED_SEQUENCE:
        graph.add_edge(name, "router")
    graph.add_edge("answer", END)
    graph.add_edge("abstain", END)
    name = f"switchyard-agent-{config.graph.router.strategy}"
    if config.graph.router.approve:
        saver = (checkpointer or InMemorySaver(serde=checkpoint_serde())).with_allowlist(CHECKPOINTED_TYPES)
        return graph.compile(name=name, checkpointer=saver)
    return graph.compile(name=name)
