"""`autogpt` (AutoGPT-style): fixed goals; each step a thought {reasoning, plan, criticism}, at most one fact to
remember, then one command. The working memory is the agent's own facts, kept in the graph state; when it grows
past `graph.router.memory_tokens` an LLM call merges it into one note, clipped to the bound, so the prompt stays
bounded however long the run."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field, ValidationError

from switchyard.llm.backend import Reply
from switchyard.llm.prompts import (
    AUTOGPT_JSON,
    AUTOGPT_MEMORY,
    AUTOGPT_SUMMARISE,
    AUTOGPT_SYSTEM,
    AUTOGPT_TOOL_REMEMBER,
    AUTOGPT_TOOLS,
)
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies.common import (
    ROUTER_TOOLS,
    Action,
    Decision,
    Proposal,
    ask_json,
    ask_tool_call,
    summarize_state,
    tool_call,
    validation_error,
)
from switchyard.run_context import RunContext

CHARS_PER_TOKEN = 4  # the usual estimate; deterministic, so replayed runs summarise at the same step


class AutoGPTStep(BaseModel):
    reasoning: str = Field("", max_length=400)
    plan: str = Field("", max_length=400)
    criticism: str = Field("", max_length=400)
    remember: str = Field("", max_length=200)
    command: Action
    query: str | None = Field(None, max_length=200)
    reason: str | None = Field(None, max_length=200)


def _with_remember(tool: dict) -> dict:
    function = tool["function"]
    parameters = {
        **function["parameters"],
        "properties": {
            **function["parameters"]["properties"],
            "remember": {"type": "string", "description": AUTOGPT_TOOL_REMEMBER},
        },
    }
    return {**tool, "function": {**function, "parameters": parameters}}


AUTOGPT_TOOL_LIST: list[dict] = [_with_remember(t) for t in ROUTER_TOOLS]


def step_from_tool_call(reply: Reply, names: tuple[str, ...]) -> tuple[AutoGPTStep | None, str]:
    name, args, error = tool_call(reply, names)
    if error:
        return None, error
    try:
        return AutoGPTStep(
            reasoning=reply.text.strip()[:400],
            remember=args.get("remember") or "",
            command=name,
            query=args.get("query"),
            reason=args.get("reason"),
        ), ""
    except ValidationError as exc:
        return None, validation_error(exc)


def memory_tokens(memory: list[str]) -> int:
    return sum(math.ceil(len(fact) / CHARS_PER_TOKEN) for fact in memory)


def remember(memory: list[str], fact: str, res: Resources, run: RunContext | None) -> tuple[list[str], bool]:
    """The memory with `fact` added, and whether it had to be summarised to stay within the bound."""
    fact = " ".join(fact.split())
    if not fact or fact in memory:
        return memory, False
    memory = memory + [fact]
    limit = res.config.graph.router.memory_tokens
    if memory_tokens(memory) <= limit:
        return memory, False
    notes = "\n".join(f"- {f}" for f in memory)
    said = res.llm.generate(
        [
            {"role": "system", "content": AUTOGPT_SUMMARISE.format(words=limit * 3 // 4)},
            {"role": "user", "content": notes},
        ],
        max_tokens=limit,
        run=run,
    )
    summary = " ".join(said.split())[: limit * CHARS_PER_TOKEN]
    if summary:
        return [summary], True
    kept: list[str] = []  # no summary came back: the newest facts that fit
    for f in reversed(memory):
        if memory_tokens(kept + [f]) > limit:
            break
        kept.insert(0, f)
    return kept, True


def autogpt(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    tools = res.config.graph.router.protocol == "tools"
    memory = list(state.get("memory") or [])
    steps = state.get("agent_steps", [])
    context = summarize_state(state, steps_left, res) + AUTOGPT_MEMORY.format(
        memory="\n".join(f"- {f}" for f in memory) or "(empty)",
        observation=steps[-1].get("observation", "") if steps else "(none)",
    )
    messages = [
        {"role": "system", "content": AUTOGPT_SYSTEM + (AUTOGPT_TOOLS if tools else AUTOGPT_JSON)},
        {"role": "user", "content": context},
    ]
    step = (
        ask_tool_call(messages, res, run, AUTOGPT_TOOL_LIST, step_from_tool_call)
        if tools
        else ask_json(messages, AutoGPTStep, res, run)
    )
    if step is None:
        return Proposal(None, record={"thoughts": {}, "memory": memory, "memory_summarised": False})
    memory, summarised = remember(memory, step.remember, res, run)
    decision = Decision(thought=step.reasoning, action=step.command, query=step.query, reason=step.reason)
    thoughts = {"reasoning": step.reasoning, "plan": step.plan, "criticism": step.criticism}
    return Proposal(
        decision, {"memory": memory}, {"thoughts": thoughts, "memory": memory, "memory_summarised": summarised}
    )
