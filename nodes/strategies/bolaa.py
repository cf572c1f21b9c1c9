"""`bolaa` (BOLAA): a controller picks which labor agent acts next and sends it a message; the agent, with its own
prompt and context, chooses one action of its own. The search agent writes queries and runs retrieve, rerank and
grade (it sees the run's state and its own earlier steps); the answer agent answers from what the search agent
kept, or abstains (it sees the kept passages). Each hand-off (agent, message) is part of the step record, so the
controller's messages are recorded with the decisions they led to. Two LLM calls a step."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from switchyard.llm.backend import Reply, function_tool
from switchyard.llm.prompts import (
    BOLAA_ANSWER,
    BOLAA_ANSWER_JSON,
    BOLAA_CONTROLLER,
    BOLAA_CONTROLLER_JSON,
    BOLAA_CONTROLLER_TOOL_ANSWER,
    BOLAA_CONTROLLER_TOOL_MESSAGE,
    BOLAA_CONTROLLER_TOOL_SEARCH,
    BOLAA_CONTROLLER_TOOLS,
    BOLAA_HANDOFFS,
    BOLAA_MESSAGE,
    BOLAA_SEARCH,
    BOLAA_SEARCH_JSON,
    BOLAA_TOOLS,
)
from switchyard.nodes.answer import number_passages
from switchyard.nodes.contextualize import question_lines
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies.common import (
    Decision,
    Proposal,
    ask_json,
    ask_tool_call,
    decision_from_tool_call,
    scratchpad,
    shown_passages,
    summarize_state,
    tool_call,
    tools_for,
    validation_error,
)
from switchyard.run_context import RunContext

Agent = Literal["search", "answer"]
LABOR: dict[str, tuple[str, ...]] = {
    "search": ("rewrite", "retrieve", "rerank", "grade"),
    "answer": ("answer", "abstain"),
}


class Handoff(BaseModel):
    agent: Agent
    message: str = Field("", max_length=200)


class SearchStep(BaseModel):
    thought: str = Field("", max_length=400)
    action: Literal["rewrite", "retrieve", "rerank", "grade"]
    query: str | None = Field(None, max_length=200)


class AnswerStep(BaseModel):
    thought: str = Field("", max_length=400)
    action: Literal["answer", "abstain"]
    reason: str | None = Field(None, max_length=200)


def _controller_tool(name: str, description: str) -> dict:
    return function_tool(
        name,
        description,
        {"type": "object", "properties": {"message": {"type": "string", "description": BOLAA_CONTROLLER_TOOL_MESSAGE}}},
    )


CONTROLLER_TOOLS: list[dict] = [
    _controller_tool("search", BOLAA_CONTROLLER_TOOL_SEARCH),
    _controller_tool("answer", BOLAA_CONTROLLER_TOOL_ANSWER),
]


def handoff_from_tool_call(reply: Reply, names: tuple[str, ...]) -> tuple[Handoff | None, str]:
    name, args, error = tool_call(reply, names)
    if error:
        return None, error
    try:
        return Handoff(agent=name, message=args.get("message") or ""), ""
    except ValidationError as exc:
        return None, validation_error(exc)


def _handoffs(steps: list[dict]) -> str:
    return "\n".join(
        f"{s.get('agent') or '-'} <- {s.get('message') or '-'}\n  did {s['action']}: {s.get('observation', '')}"
        for s in steps
    )


def _ask_controller(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Handoff | None:
    tools = res.config.graph.router.protocol == "tools"
    steps = state.get("agent_steps", [])
    messages = [
        {"role": "system", "content": BOLAA_CONTROLLER + (BOLAA_CONTROLLER_TOOLS if tools else BOLAA_CONTROLLER_JSON)},
        {
            "role": "user",
            "content": summarize_state(state, steps_left, res)
            + (BOLAA_HANDOFFS.format(handoffs=_handoffs(steps)) if steps else ""),
        },
    ]
    if tools:
        return ask_tool_call(messages, res, run, CONTROLLER_TOOLS, handoff_from_tool_call)
    return ask_json(messages, Handoff, res, run)


def _search_context(state: dict, steps_left: int, message: str, res: Resources) -> tuple[str, list[dict]]:
    own = [s for s in state.get("agent_steps", []) if s.get("agent") == "search"]
    return summarize_state(state, steps_left, res) + BOLAA_MESSAGE.format(message=message or "-"), own


def _answer_context(state: dict, message: str, res: Resources) -> str:
    kept = shown_passages(state.get("graded") or state.get("reranked") or state.get("candidates") or [], res)
    passages = number_passages(kept[:3], res.config.answer.spotlight, titles=False, clip=300)
    return (
        "\n".join(question_lines(state))
        + BOLAA_MESSAGE.format(message=message or "-")
        + "\nPassages kept by the search agent:\n"
        + (passages or "(none)")
    )


def _ask_labor(
    agent: str, state: dict, res: Resources, steps_left: int, message: str, run: RunContext | None
) -> Decision | None:
    tools = res.config.graph.router.protocol == "tools"
    schema: type[BaseModel]
    if agent == "search":
        context, own = _search_context(state, steps_left, message, res)
        system, schema = BOLAA_SEARCH + (BOLAA_TOOLS if tools else BOLAA_SEARCH_JSON), SearchStep
        pad = scratchpad(own)
        user = context + (f"\nYour earlier steps:\n{pad}" if pad else "")
    else:
        system, schema = BOLAA_ANSWER + (BOLAA_TOOLS if tools else BOLAA_ANSWER_JSON), AnswerStep
        user = _answer_context(state, message, res)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    if tools:
        return ask_tool_call(messages, res, run, tools_for(LABOR[agent]), decision_from_tool_call)
    step = ask_json(messages, schema, res, run)
    return None if step is None else Decision(**step.model_dump())


def bolaa(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    handoff = _ask_controller(state, res, steps_left, run)
    if handoff is None:
        return Proposal(None, record={"agent": None, "message": ""})
    decision = _ask_labor(handoff.agent, state, res, steps_left, handoff.message, run)
    return Proposal(decision, record={"agent": handoff.agent, "message": handoff.message})
