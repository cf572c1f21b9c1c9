"""`react` (ReAct): a thought, then an action, after few-shot examples (`graph.router.examples`) and a scratchpad
of the earlier steps (thought, action, observation)."""

from __future__ import annotations

from switchyard.llm.prompts import ROUTER_FORMAT_REACT, ROUTER_FORMAT_TOOLS_REACT, ROUTER_SYSTEM
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies.common import Proposal, ask_decision, scratchpad, summarize_state
from switchyard.run_context import RunContext


def react_system(protocol: str) -> str:
    return ROUTER_SYSTEM + (ROUTER_FORMAT_TOOLS_REACT if protocol == "tools" else ROUTER_FORMAT_REACT)


def react_messages(system: str, examples: list[str], context: str, steps: list[dict]) -> list[dict]:
    messages = [{"role": "system", "content": system}]
    if examples:
        messages.append({"role": "user", "content": "Examples:\n" + "\n".join(examples)})
    pad = scratchpad(steps)
    messages.append({"role": "user", "content": context + (f"\nEarlier steps:\n{pad}" if pad else "")})
    return messages


def react(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    cfg = res.config.graph.router
    messages = react_messages(
        react_system(cfg.protocol), cfg.examples, summarize_state(state, steps_left, res), state.get("agent_steps", [])
    )
    return Proposal(ask_decision(messages, res, run))
