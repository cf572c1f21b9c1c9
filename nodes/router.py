"""router: in agent mode an LLM chooses each next step over the same nodes as the fixed pipeline.

Strategies: `zeroshot` (the next action from a compact state summary), `react` (a thought, then an action, with
few-shot examples and a scratchpad of earlier steps), `plan` (write a short plan, execute it, re-plan when a step
fails). Actions: rewrite(query), retrieve(query), rerank, grade, answer, abstain(reason).

Guards, each recorded in the step's `guard` field:
- `invalid`: the reply did not parse or validate after one repair round -> the fixed pipeline's next edge;
- `repeat`: the same action with the same arguments on an unchanged state -> not executed again; the fixed
  pipeline's next edge instead (or, if that repeats too, answer/abstain);
- `premature_answer`: answer before any passage was retrieved -> the fixed pipeline's next edge;
- `ungrounded_query`: a rewrite/retrieve query sharing no content word with the question, the current query or the
  passages found so far (small models copy the prompt's field description, "only for rewrite/retrieve", as the
  query) -> the query is dropped: retrieve searches the current query, rewrite writes its own;
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
from typing import Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, ValidationError

from llm import telemetry
from llm.backend import Reply, function_tool
from llm.context import RunContext
from llm.prompts import (ROUTER_FORMAT_PLAN, ROUTER_FORMAT_REACT, ROUTER_FORMAT_TOOLS, ROUTER_FORMAT_TOOLS_REACT,
                           ROUTER_FORMAT_ZEROSHOT, ROUTER_SYSTEM, ROUTER_TOOL_ABSTAIN, ROUTER_TOOL_ANSWER,
                           ROUTER_TOOL_GRADE, ROUTER_TOOL_QUERY, ROUTER_TOOL_REASON, ROUTER_TOOL_RERANK,
                           ROUTER_TOOL_RETRIEVE, ROUTER_TOOL_REWRITE, ROUTER_TOOLS_REPAIR)
from nodes.citations import content_words
from nodes.grade import GRADE_ROUTES, route_after_grade
from nodes.resources import Resources

Action = Literal["rewrite", "retrieve", "rerank", "grade", "answer", "abstain"]
ACTIONS: tuple[str, ...] = ("rewrite", "retrieve", "rerank", "grade", "answer", "abstain")


class Decision(BaseModel):
    thought: str = Field("", max_length=400)
    action: Action
    query: str | None = Field(None, max_length=200)
    reason: str | None = Field(None, max_length=200)


class Plan(BaseModel):
    steps: list[Action] = Field(min_length=1, max_length=8)


def _tool(name: str, description: str, argument: str | None = None, argument_description: str = "") -> dict:
    properties = {argument: {"type": "string", "description": argument_description}} if argument else {}
    return function_tool(name, description, {"type": "object", "properties": properties})


ROUTER_TOOLS: list[dict] = [
    _tool("rewrite", ROUTER_TOOL_REWRITE, "query", ROUTER_TOOL_QUERY),
    _tool("retrieve", ROUTER_TOOL_RETRIEVE, "query", ROUTER_TOOL_QUERY),
    _tool("rerank", ROUTER_TOOL_RERANK),
    _tool("grade", ROUTER_TOOL_GRADE),
    _tool("answer", ROUTER_TOOL_ANSWER),
    _tool("abstain", ROUTER_TOOL_ABSTAIN, "reason", ROUTER_TOOL_REASON),
]


def decision_from_tool_call(reply: Reply) -> tuple[Decision | None, str]:
    """The decision a reply's first tool call makes (its text is the thought), or why there is none."""
    if not reply.tool_calls:
        return None, "no tool call"
    call = reply.tool_calls[0]
    if call["name"] not in ACTIONS:
        return None, f"unknown tool {call['name']!r}"
    try:
        args = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError as exc:
        return None, f"arguments are not JSON: {exc.msg}"
    if not isinstance(args, dict):
        return None, "arguments are not a JSON object"
    try:
        return Decision(thought=reply.text.strip()[:400], action=call["name"], query=args.get("query"),
                        reason=args.get("reason")), ""
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, f"{'.'.join(map(str, first['loc'])) or 'value'}: {first['msg']}"


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
    return state.get("query") or state["question"]


def _has_passages(state: dict) -> bool:
    return bool(state.get("graded") or state.get("reranked") or state.get("candidates"))


_INPUTS = {"rerank": {"retrieve"}, "grade": {"retrieve", "rerank"}, "rewrite": {"grade"}}


def is_grounded(query: str, state: dict) -> bool:
    """Does the query share a content word with what the run knows: the question, the current query, the passages?"""
    known = " ".join([state["question"], state.get("query") or ""]
                     + [p.text for p in state.get("candidates", [])])
    return bool(content_words(query) & content_words(known))


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


def summarize_state(state: dict, steps_left: int) -> str:
    verdict = state.get("verdict")
    lines = [f"Question: {state['question']}",
             f"Current query: {state.get('query') or '(none yet)'}",
             f"Passages found: {len(state.get('candidates', []))}; reranked: {len(state.get('reranked', []))}; "
             f"graded relevant: {len(state.get('graded', []))}" + (f" (verdict {verdict})" if verdict else ""),
             f"Last action: {state.get('last_action') or '(none)'}; steps left: {steps_left}"]
    top = state.get("graded") or state.get("reranked") or state.get("candidates") or []
    if top:
        lines.append("Best passage: " + " ".join(top[0].text.split())[:200])
    return "\n".join(lines)


def _scratchpad(state: dict) -> str:
    return "\n".join(f"Thought: {s.get('thought') or '-'}\nAction: {s['action']}"
                     + (f"({json.dumps(s['args'])})" if s.get("args") else "")
                     + f"\nObservation: {s.get('observation', '')}" for s in state.get("agent_steps", []))


def _system(strategy: str, protocol: str = "json") -> str:
    if protocol == "tools":
        return ROUTER_SYSTEM + (ROUTER_FORMAT_TOOLS_REACT if strategy == "react" else ROUTER_FORMAT_TOOLS)
    formats = {"plan": ROUTER_FORMAT_PLAN, "react": ROUTER_FORMAT_REACT}
    return ROUTER_SYSTEM + formats.get(strategy, ROUTER_FORMAT_ZEROSHOT)


def _decision_messages(state: dict, res: Resources, steps_left: int) -> list[dict]:
    cfg = res.config.graph.router
    messages = [{"role": "system", "content": _system(cfg.strategy, cfg.protocol)}]
    if cfg.strategy == "react":
        if cfg.examples:
            messages.append({"role": "user", "content": "Examples:\n" + "\n".join(cfg.examples)})
        pad = _scratchpad(state)
        messages.append({"role": "user", "content": summarize_state(state, steps_left)
                         + (f"\nEarlier steps:\n{pad}" if pad else "")})
    else:
        messages.append({"role": "user", "content": summarize_state(state, steps_left)})
    return messages


def _ask_decision(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Decision | None:
    cfg = res.config.graph.router
    messages = _decision_messages(state, res, steps_left)
    result = res.llm.structured(messages, Decision, fallback=Decision(action="abstain"), max_tokens=cfg.max_tokens,
                                run=run)
    return None if result.status == "fallback" else result.value


def _ask_tool_call(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Decision | None:
    cfg = res.config.graph.router
    messages = _decision_messages(state, res, steps_left)
    reply = res.llm.call_tools(messages, ROUTER_TOOLS, cfg.tool_choice, cfg.max_tokens, run=run)
    decision, error = decision_from_tool_call(reply)
    if decision is not None:
        return decision
    said = reply.text.strip() or "".join(f"{c['name']}({c['arguments']})" for c in reply.tool_calls[:1])
    repair = messages + [{"role": "assistant", "content": said or "(nothing)"},
                         {"role": "user", "content": ROUTER_TOOLS_REPAIR.format(error=error, tools=", ".join(ACTIONS))}]
    decision, _ = decision_from_tool_call(res.llm.call_tools(repair, ROUTER_TOOLS, cfg.tool_choice, cfg.max_tokens,
                                                             run=run))
    if decision is None and run is not None:
        run.record_parse_fallback()
    return decision


def _ask_plan(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> list[str] | None:
    messages = [{"role": "system", "content": _system("plan")},
                {"role": "user", "content": summarize_state(state, steps_left)}]
    result = res.llm.structured(messages, Plan, fallback=Plan(steps=["abstain"]),
                                max_tokens=res.config.graph.router.max_tokens, run=run)
    return None if result.status == "fallback" else list(result.value.steps)


def route(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    """The router node: the next action, with the decision's own LLM cost in its record."""
    run = runtime.context or RunContext()
    cfg = res.config.graph.router
    with telemetry.span("decision", {telemetry.SPAN_KIND: "AGENT", "switchyard.agent.strategy": cfg.strategy,
                                     "switchyard.agent.protocol": cfg.protocol}) as span, run.metered() as spent:
        update = _decide(state, res, run)
        record = update["decision"]
        if span.is_recording():
            span.set_attributes({"switchyard.agent.step": record["step"], "switchyard.agent.action": record["action"],
                                 "switchyard.agent.guard": record["guard"] or "",
                                 "switchyard.agent.llm_calls": spent.llm_calls})
            if telemetry.capture_content():  # a query or reason in args is text like the question
                span.set_attributes({"switchyard.agent.args": json.dumps(record["args"], ensure_ascii=False),
                                     "switchyard.agent.thought": record["thought"]})
    update["decision"].update(spent.as_dict())
    return update


def _decide(state: dict, res: Resources, run: RunContext) -> dict:
    cfg = res.config.graph.router
    max_retries = res.config.grade.max_retries
    step = state.get("step_count", 0) + 1
    steps_left = cfg.max_steps - step + 1
    started = time.perf_counter()
    thought, guard, args, plan = "", None, {}, list(state.get("plan") or [])

    executed = state.get("executed", [])
    if step > cfg.max_steps:
        action, guard = ("answer" if _has_passages(state) else "abstain"), "budget"
    else:
        decision: Decision | None
        if cfg.strategy == "plan":
            if not plan or (state.get("last_action") == "grade" and state.get("verdict") == "incorrect"):
                plan = _ask_plan(state, res, steps_left, run) or []
            decision = Decision(action=plan.pop(0)) if plan else None
        elif cfg.protocol == "tools":
            decision = _ask_tool_call(state, res, steps_left, run)
        else:
            decision = _ask_decision(state, res, steps_left, run)
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

    decision_record = {"step": step, "thought": thought, "action": action, "args": args, "guard": guard,
                       "router_ms": round((time.perf_counter() - started) * 1e3, 2)}
    return {"next_action": action, "action_args": args, "step_count": step, "plan": plan,
            "decision": decision_record, "executed": [(action, args)]}


def choose_edge(state: dict) -> str:
    """The router's conditional edge: the action it chose (one of ACTIONS)."""
    return state["next_action"]
