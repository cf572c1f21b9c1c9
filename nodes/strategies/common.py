"""What every router strategy shares: the actions, the decision a strategy proposes, the tools, the state summary
and the two ways of asking the model for one decision (a JSON object, or a native tool call, each with one repair
round). The guards that judge a proposal live in nodes/router.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from switchyard.llm.backend import Reply, function_tool
from switchyard.llm.prompts import (
    ROUTER_DIRECT_REPLY,
    ROUTER_FORMAT_PLAN,
    ROUTER_PASSAGE_DATA,
    ROUTER_SYSTEM,
    ROUTER_TOOL_ABSTAIN,
    ROUTER_TOOL_ANSWER,
    ROUTER_TOOL_GRADE,
    ROUTER_TOOL_QUERY,
    ROUTER_TOOL_REASON,
    ROUTER_TOOL_REPLY,
    ROUTER_TOOL_RERANK,
    ROUTER_TOOL_RETRIEVE,
    ROUTER_TOOL_REWRITE,
    ROUTER_TOOLS_REPAIR,
)
from switchyard.nodes.contextualize import question_lines
from switchyard.nodes.resources import Resources
from switchyard.retrievers.injection import unflagged
from switchyard.run_context import RunContext

Action = Literal["rewrite", "retrieve", "rerank", "grade", "answer", "abstain"]
ACTIONS: tuple[str, ...] = ("rewrite", "retrieve", "rerank", "grade", "answer", "abstain")


class Decision(BaseModel):
    thought: str = Field("", max_length=400)
    action: Action
    query: str | None = Field(None, max_length=200)
    reason: str | None = Field(None, max_length=200)


class ReplyDecision(Decision):
    """A decision that may also be `reply` (graph.router.direct_reply): a direct answer without retrieval."""

    # one more action than a Decision, on purpose; a common base would reorder the fields of both JSON schemas,
    # which are part of the recorded requests
    action: Literal["rewrite", "retrieve", "rerank", "grade", "answer", "abstain", "reply"]  # type: ignore[assignment]


class Plan(BaseModel):
    steps: list[Action] = Field(min_length=1, max_length=8)


@dataclass
class Proposal:
    """A strategy's answer for one step: the decision (None: no valid one after the repair round), the per-run
    state it keeps (plan, memory), and extra fields for the step record (agent, message, plan, memory)."""

    decision: Decision | None
    update: dict = field(default_factory=dict)
    record: dict = field(default_factory=dict)


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
REPLY_TOOL: dict = _tool("reply", ROUTER_TOOL_REPLY)  # offered only with graph.router.direct_reply


def tools_for(names: tuple[str, ...]) -> list[dict]:
    """The router tools for these actions, in ACTIONS order."""
    return [t for t in ROUTER_TOOLS if t["function"]["name"] in names]


def tool_call(reply: Reply, names: tuple[str, ...]) -> tuple[str, dict, str]:
    """The first tool call of a reply as (name, arguments), or ("", {}, why there is no valid one)."""
    if not reply.tool_calls:
        return "", {}, "no tool call"
    call = reply.tool_calls[0]
    if call["name"] not in names:
        return "", {}, f"unknown tool {call['name']!r}"
    try:
        args = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError as exc:
        return "", {}, f"arguments are not JSON: {exc.msg}"
    if not isinstance(args, dict):
        return "", {}, "arguments are not a JSON object"
    return call["name"], args, ""


def validation_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or 'value'}: {first['msg']}"


def decision_from_tool_call(reply: Reply, names: tuple[str, ...] = ACTIONS) -> tuple[Decision | None, str]:
    """The decision a reply's first tool call makes (its text is the thought), or why there is none."""
    name, args, error = tool_call(reply, names)
    if error:
        return None, error
    model = ReplyDecision if name == "reply" else Decision
    try:
        return model(
            thought=reply.text.strip()[:400], action=name, query=args.get("query"), reason=args.get("reason")
        ), ""
    except ValidationError as exc:
        return None, validation_error(exc)


def shown_passages(passages: list, res: Resources | None) -> list:
    """The passages the router may read: with `retrieve.injection_policy` demote or exclude, none that is flagged
    as instruction-like (retrievers/injection.py): an agent never reads a flagged passage, so it cannot act on it."""
    if res is None:
        return passages
    return unflagged(passages, res.config.retrieve.injection_policy, res.config.retrieve.injection_threshold)


def summarize_state(state: dict, steps_left: int, res: Resources | None = None) -> str:
    """The run's state as the router reads it. With `res`, the best passage shown is one the injection policy lets
    the router read (`shown_passages`), datamarked with answer.spotlight: datamark."""
    verdict = state.get("verdict")
    lines = [
        *question_lines(state),
        f"Current query: {state.get('query') or '(none yet)'}",
        f"Passages found: {len(state.get('candidates', []))}; reranked: {len(state.get('reranked', []))}; "
        f"graded relevant: {len(state.get('graded', []))}" + (f" (verdict {verdict})" if verdict else ""),
        f"Last action: {state.get('last_action') or '(none)'}; steps left: {steps_left}",
    ]
    top = shown_passages(state.get("graded") or state.get("reranked") or state.get("candidates") or [], res)
    if top:
        text = " ".join(top[0].text.split())[:200]
        if res is not None and res.config.answer.spotlight == "datamark":
            lines.append(ROUTER_PASSAGE_DATA + text.replace(" ", "^"))
        else:
            lines.append("Best passage: " + text)
    return "\n".join(lines)


def scratchpad(steps: list[dict]) -> str:
    return "\n".join(
        f"Thought: {s.get('thought') or '-'}\nAction: {s['action']}"
        + (f"({json.dumps(s['args'])})" if s.get("args") else "")
        + f"\nObservation: {s.get('observation', '')}"
        for s in steps
    )


def ask_json(messages: list[dict], model: type[BaseModel], res: Resources, run: RunContext | None):
    """One schema-constrained reply (one repair round inside `LLM.structured`), or None."""
    result = res.llm.structured(
        messages, model, fallback=model.model_construct(), max_tokens=res.config.graph.router.max_tokens, run=run
    )
    return None if result.status == "fallback" else result.value


def ask_tool_call(
    messages: list[dict],
    res: Resources,
    run: RunContext | None,
    tools: list[dict] = ROUTER_TOOLS,
    parse=decision_from_tool_call,
):
    """One native tool call among `tools`, parsed by `parse(reply) -> (value, error)`; one repair round."""
    cfg = res.config.graph.router
    names = tuple(t["function"]["name"] for t in tools)
    reply = res.llm.call_tools(messages, tools, cfg.tool_choice, cfg.max_tokens, run=run)
    value, error = parse(reply, names)
    if value is not None:
        return value
    said = reply.text.strip() or "".join(f"{c['name']}({c['arguments']})" for c in reply.tool_calls[:1])
    repair = messages + [
        {"role": "assistant", "content": said or "(nothing)"},
        {"role": "user", "content": ROUTER_TOOLS_REPAIR.format(error=error, tools=", ".join(names))},
    ]
    value, _ = parse(res.llm.call_tools(repair, tools, cfg.tool_choice, cfg.max_tokens, run=run), names)
    if run is not None and value is None:
        run.record_parse_fallback()
    elif run is not None:
        run.record_repair()
    return value


def ask_decision(messages: list[dict], res: Resources, run: RunContext | None) -> Decision | None:
    """The next action under the configured protocol: a JSON decision or a tool call. With
    graph.router.direct_reply the `reply` action is offered too (and said so in the system prompt)."""
    direct_reply = res.config.graph.router.direct_reply
    if direct_reply:
        messages = [{**messages[0], "content": messages[0]["content"] + ROUTER_DIRECT_REPLY}, *messages[1:]]
    if res.config.graph.router.protocol == "tools":
        return ask_tool_call(messages, res, run, ROUTER_TOOLS + [REPLY_TOOL] if direct_reply else ROUTER_TOOLS)
    return ask_json(messages, ReplyDecision if direct_reply else Decision, res, run)


def ask_plan(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> list[str] | None:
    messages = [
        {"role": "system", "content": ROUTER_SYSTEM + ROUTER_FORMAT_PLAN},
        {"role": "user", "content": summarize_state(state, steps_left, res)},
    ]
    plan = ask_json(messages, Plan, res, run)
    return None if plan is None else list(plan.steps)
