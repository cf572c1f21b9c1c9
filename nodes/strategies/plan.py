"""`plan` (PlanAct): a short plan first, executed step by step, re-planned when grading finds nothing relevant.
`plan-react` (PlanReAct): the same plan, but each step is a ReAct thought and action that sees the remaining plan
and may leave it; re-planned when grading finds nothing relevant or a guard overrode the last step."""

from __future__ import annotations

from switchyard.llm.prompts import PLAN_REACT_EXAMPLES, ROUTER_PLAN_NOW
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies.common import Decision, Proposal, ask_decision, ask_plan, summarize_state
from switchyard.nodes.strategies.react import react_messages, react_system
from switchyard.run_context import RunContext


def _grading_failed(state: dict) -> bool:
    return state.get("last_action") == "grade" and state.get("verdict") == "incorrect"


def plan(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    steps = list(state.get("plan") or [])
    if not steps or _grading_failed(state):
        steps = ask_plan(state, res, steps_left, run) or []
    decision = Decision(action=steps.pop(0)) if steps else None
    return Proposal(decision, {"plan": steps})


def plan_react(state: dict, res: Resources, steps_left: int, run: RunContext | None) -> Proposal:
    steps = list(state.get("plan") or [])
    overridden = (state.get("decision") or {}).get("guard") is not None
    if not steps or _grading_failed(state) or overridden:
        steps = ask_plan(state, res, steps_left, run) or []
    context = summarize_state(state, steps_left, res) + ROUTER_PLAN_NOW.format(plan=", ".join(steps) or "(none)")
    messages = react_messages(
        react_system(res.config.graph.router.protocol), [PLAN_REACT_EXAMPLES], context, state.get("agent_steps", [])
    )
    decision = ask_decision(messages, res, run)
    shown = list(steps)
    if decision is not None and steps and decision.action == steps[0]:
        steps = steps[1:]
    return Proposal(decision, {"plan": steps}, {"plan": shown})
