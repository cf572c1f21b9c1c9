"""router: in agent mode an LLM chooses each next step over the same nodes as the fixed pipeline.

Strategies (nodes/strategies/, one module each, `graph.router.strategy`): `zeroshot` (the next action from a compact
state summary), `zeroshot-think` (a free-text thought first), `react` (a thought, then an action, with few-shot
examples and a scratchpad of earlier steps), `plan` (write a short plan, execute it, re-plan when a step fails),
`plan-react` (a plan, then a ReAct step that sees it), `bolaa` (a controller hands each step to a search or an answer
agent), `autogpt` (goals, a reasoning/plan/criticism thought and a bounded working memory). Each proposes a
decision; this module judges every proposal with the same guards. Actions: rewrite(query), retrieve(query), rerank,
grade, answer, abstain(reason), and with graph.router.direct_reply reply (a direct answer without retrieval).

Guards, each recorded in the step's `guard` field:
- `invalid`: the reply did not parse or validate after one repair round -> the fixed pipeline's next edge;
- `repeat`: the same action with the same arguments on an unchanged state -> not executed again; the fixed
  pipeline's next edge instead (or, if that repeats too, answer/abstain);
- `premature_answer`: answer before any passage was retrieved -> the fixed pipeline's next edge;
- `ungrounded_query`: a rewrite/retrieve query sharing no content word with the question, the current query or the
  passages found so far (small models copy the prompt's field description, "only for rewrite/retrieve", as the
  query) -> the query is dropped: retrieve searches the current query, rewrite writes its own;
- `needs_documents`: `reply` (graph.router.direct_reply) to a question that nodes/no_documents.py's rules do not
  detect as small talk or arithmetic -> the fixed pipeline's next edge: the agent may not answer without looking;
- `injected`: (`retrieve.injection_policy` demote or exclude) a query or abstention reason with words that only
  instructions in the passages hold — a flagged passage (retrievers/injection.py), or a sentence of an unflagged one
  with an instruction feature; not the question, the current query or the rest of the passages — follows an
  instruction planted in the documents -> a query is dropped (as for `ungrounded_query`), an abstention
  becomes the fixed pipeline's next edge. The router is never shown flagged passages (strategies/common.py
  `shown_passages`); this catches what reaches it another way (a thought, a memory, a model that saw it earlier);
- `budget`: `router.max_steps` decisions made -> answer from what the run has, or abstain.
Every run therefore ends with an answer or an explicit abstention.

Protocols (`graph.router.protocol`): `json`, the decision as a schema-constrained JSON object; `tools`, every action
is a tool (`ROUTER_TOOLS`, OpenAI format) and the model chooses by a native tool call, its message text being the
thought. A reply without a valid call (no call, an unknown tool, arguments that are not a JSON object or break the
`Decision` limits) gets one repair round, then the `invalid` guard, exactly as a JSON reply that does not validate.
"""

from __future__ import annotations

import json
import time

from langgraph.runtime import Runtime

from switchyard import tracing
from switchyard.nodes.contextualize import search_text
from switchyard.nodes.grade import GRADE_ROUTES, route_after_grade
from switchyard.nodes.no_documents import classify
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies import STRATEGIES
from switchyard.nodes.strategies.common import (
    ACTIONS,
    ROUTER_TOOLS,
    Action,
    Decision,
    Plan,
    decision_from_tool_call,
    summarize_state,
)
from switchyard.retrievers.injection import is_flagged, split_instructions
from switchyard.run_context import RunContext
from switchyard.text import content_words

__all__ = [
    "ACTIONS",
    "ROUTER_TOOLS",
    "Action",
    "Decision",
    "Plan",
    "decision_from_tool_call",
    "summarize_state",
    "FIXED_SEQUENCE",
    "fixed_next",
    "echoes_instructions",
    "is_grounded",
    "is_repeat",
    "route",
    "choose_edge",
]


FIXED_SEQUENCE: tuple[str, ...] = ("rewrite", "retrieve", "rerank", "grade")  # then `route_after_grade`


def fixed_next(state: dict, max_retries: int) -> str:
    """The edge the fixed pipeline would take from here (graphs/build.py wires the same sequence and rule)."""
    last = state.get("last_action")
    if last is None:
        return FIXED_SEQUENCE[0]
    if last == "grade":
        return GRADE_ROUTES[route_after_grade(state, max_retries)]
    if last in FIXED_SEQUENCE:
        return FIXED_SEQUENCE[FIXED_SEQUENCE.index(last) + 1]
    return "abstain"


def _current_query(state: dict) -> str:
    return state.get("query") or search_text(state)


def _has_passages(state: dict) -> bool:
    return bool(state.get("graded") or state.get("reranked") or state.get("candidates"))


_INPUTS = {"rerank": {"retrieve"}, "grade": {"retrieve", "rerank"}, "rewrite": {"grade"}}


def is_grounded(query: str, state: dict) -> bool:
    """Does the query share a content word with what the run knows: the question, the current query, the passages?"""
    known = " ".join(
        [state["question"], search_text(state), state.get("query") or ""]
        + [p.text for p in state.get("candidates", [])]
    )
    return bool(content_words(query) & content_words(known))


def echoes_instructions(text: str, state: dict, threshold: float) -> bool:
    """Does `text` use words that only instructions in the run's passages hold: flagged passages, and the sentences
    of unflagged ones with an instruction feature (retrievers/injection.py `split_instructions`), and none of the
    question, the current query or the rest of the passages? Such a query or reason follows a planted
    instruction, not the question, even one phrased around the detector (one feature, below the threshold)."""
    if not text:
        return False
    found = state.get("candidates", []) + state.get("reranked", []) + state.get("graded", [])
    planted, known = [], [state["question"], search_text(state), state.get("query") or ""]
    for p in found:
        if is_flagged(p, threshold):
            planted.append(p.text)
        else:
            plain, marked = split_instructions(p.text)
            known.append(plain)
            planted.append(marked)
    suspect = content_words(" ".join(planted)) - content_words(" ".join(known))
    return bool(suspect and content_words(text) & suspect)


def is_repeat(action: str, args: dict, executed: list) -> bool:
    """Would this step redo work whose inputs have not changed since it last ran?

    retrieve/rewrite with a query repeat when that exact call ran before; rerank, grade and an argument-less
    rewrite repeat when they already ran since the last step that changes their input.
    """
    history = [(a, g) for a, g in executed]
    if action in ("rewrite", "retrieve") and args:
        return (action, args) in history
    if action in _INPUTS:
        for past, _ in reversed(history):
            if past == action:
                return True
            if past in _INPUTS[action]:
                return False
    return False


def route(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    """The router node: the next action, with the decision's own LLM cost in its record."""
    run = runtime.context or RunContext()
    cfg = res.config.graph.router
    with (
        tracing.span(
            "decision",
            {
                tracing.SPAN_KIND: "AGENT",
                "switchyard.agent.strategy": cfg.strategy,
                "switchyard.agent.protocol": cfg.protocol,
            },
        ) as span,
        run.metered() as spent,
    ):
        update = _decide(state, res, run)
        record = update["decision"]
        if span.is_recording():
            span.set_attributes(
                {
                    "switchyard.agent.step": record["step"],
                    "switchyard.agent.action": record["action"],
                    "switchyard.agent.guard": record["guard"] or "",
                    "switchyard.agent.llm_calls": spent.llm_calls,
                }
            )
            if tracing.capture_content():  # a query or reason in args is text like the question
                span.set_attributes(
                    {
                        "switchyard.agent.args": json.dumps(record["args"], ensure_ascii=False),
                        "switchyard.agent.thought": record["thought"],
                    }
                )
    update["decision"].update(spent.as_dict())
    if spent.repairs:  # only when a reply needed the repair round, so that clean records stay as they were
        update["decision"]["repairs"] = spent.repairs
    return update


def _decide(state: dict, res: Resources, run: RunContext) -> dict:
    cfg = res.config.graph.router
    max_retries = res.config.grade.max_retries
    step = state.get("step_count", 0) + 1
    steps_left = cfg.max_steps - step + 1
    started = time.perf_counter()
    thought, guard, args = "", None, {}
    kept: dict = {"plan": list(state.get("plan") or [])}  # what the strategy keeps between steps
    extra: dict = {}  # the strategy's own fields in the step record

    executed = state.get("executed", [])
    if step > cfg.max_steps:
        action, guard = ("answer" if _has_passages(state) else "abstain"), "budget"
    else:
        proposal = STRATEGIES[cfg.strategy](state, res, steps_left, run)
        kept.update(proposal.update)
        extra = proposal.record
        decision: Decision | None = proposal.decision
        if decision is None:
            action, guard = fixed_next(state, max_retries), "invalid"
        else:
            action, thought = decision.action, decision.thought
            if action in ("rewrite", "retrieve") and decision.query and decision.query.strip():
                args = {"query": decision.query.strip()}
            elif action == "abstain" and decision.reason:
                args = {"reason": decision.reason.strip()}
            if args.get("query") and not is_grounded(args["query"], state):
                args, guard = {}, "ungrounded_query"
            policy = res.config.retrieve
            if policy.injection_policy != "keep" and any(
                echoes_instructions(v, state, policy.injection_threshold) for v in args.values()
            ):
                if action == "abstain":
                    action = fixed_next(state, max_retries)
                args, guard = {}, "injected"
            if action == "reply" and classify(state["question"]) is None:
                action, guard = fixed_next(state, max_retries), "needs_documents"
        if action == "retrieve" and not args:  # retrieving "the current query" is a call with that query
            args = {"query": _current_query(state)}
        if action == "answer" and not _has_passages(state):
            action, args, guard = fixed_next(state, max_retries), {}, "premature_answer"
        if is_repeat(action, args, executed):
            action, args, guard = fixed_next(state, max_retries), {}, "repeat"
            if action == "retrieve":
                args = {"query": _current_query(state)}
            if is_repeat(action, args, executed):
                action, args = ("answer" if _has_passages(state) else "abstain"), {}

    decision_record = {
        "step": step,
        "thought": thought,
        "action": action,
        "args": args,
        "guard": guard,
        **extra,
        "router_ms": round((time.perf_counter() - started) * 1e3, 2),
    }
    return {
        "next_action": action,
        "action_args": args,
        "step_count": step,
        **kept,
        "decision": decision_record,
        "executed": [(action, args)],
    }


def choose_edge(state: dict) -> str:
    """The router's conditional edge: the action it chose (one of ACTIONS)."""
    return state["next_action"]
