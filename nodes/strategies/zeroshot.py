"""`zeroshot` (ZS): the next action from a compact state summary. `zeroshot-think` (ZST): first a free-text thought
(a call of its own, unconstrained), then the zero-shot decision with that thought in view."""

from __future__ import annotations

from switchyard.llm.prompts import (
    ROUTER_FORMAT_THINK,
    ROUTER_FORMAT_TOOLS,
    ROUTER_FORMAT_ZEROSHOT,
    ROUTER_SYSTEM,
    ROUTER_THOUGHT,
)
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies.common import Proposal, ask_decision, summarize_state
from switchyard.run_context import RunContext


def _system(protocol: str) -> str:
    return ROUTER_SYSTEM + (ROUTER_FORMAT_TOOLS if protocol == "tools" else ROUTER_FORMAT_ZEROSHOT)


def zeroshot(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    messages = [
        {"role": "system", "content": _system(res.config.graph.router.protocol)},
        {"role": "user", "content": summarize_state(state, steps_left, res)},
    ]
    return Proposal(ask_decision(messages, res, run))


def zeroshot_think(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    summary = summarize_state(state, steps_left, res)
    said = res.llm.generate(
        [{"role": "system", "content": ROUTER_SYSTEM + ROUTER_FORMAT_THINK}, {"role": "user", "content": summary}],
        max_tokens=res.config.graph.router.max_tokens,
        run=run,
    )
    thought = " ".join(said.split())[:400]
    messages = [
        {"role": "system", "content": _system(res.config.graph.router.protocol)},
        {"role": "user", "content": summary + ROUTER_THOUGHT.format(thought=thought or "-")},
    ]
    decision = ask_decision(messages, res, run)
    return Proposal(None if decision is None else decision.model_copy(update={"thought": thought}))
