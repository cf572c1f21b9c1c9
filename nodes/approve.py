"""approve (graph.router.approve): a human in the loop between the router's decision and its action.

The node runs after the router's guards have judged a decision and before the chosen action executes. It pauses the
run with LangGraph's `interrupt`, whose value is the pending action (`pending_action`); the run's state waits in the
graph's checkpointer until someone resumes it with `Command(resume=Approval(...).model_dump())`:

- `approve`: the action runs as the agent chose it;
- `edit`: the action runs with the human's arguments (checked by `checked_arguments`, the `Decision` limits);
- `reject`: the action does not run; the rejection is a step record of its own (its observation names the reason)
  and the router decides again, still within `graph.router.max_steps` and its guards. A rejected final step forced
  by the budget becomes an abstention, so every run still ends with an answer or an abstention.

The human's answer is kept in the step record's `human` field, so traces and replays show it. LangGraph re-runs the
node from its start when the run resumes; the node is cheap (no LLM call) and `interrupt` then returns the answer.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from switchyard.errors import ApprovalError
from switchyard.nodes.resources import Resources
from switchyard.nodes.strategies.common import Decision, ReplyDecision, validation_error
from switchyard.run_context import RunContext

ARGUMENTS: dict[str, tuple[str, ...]] = {"rewrite": ("query",), "retrieve": ("query",), "abstain": ("reason",)}


class Approval(BaseModel):
    """A human's answer to a paused run."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "edit", "reject"]
    arguments: dict[str, Any] | None = Field(
        None, description='edit: the action\'s new arguments, e.g. {"query": "..."} for rewrite/retrieve'
    )
    reason: str | None = Field(None, max_length=200, description="reject: why (the agent sees it)")


def checked_arguments(action: str, arguments: dict[str, Any] | None) -> dict[str, str]:
    """Edited arguments for `action`, stripped and within the `Decision` limits; `ApprovalError` otherwise."""
    arguments = dict(arguments or {})
    allowed = ARGUMENTS.get(action, ())
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) or "no arguments"
        raise ApprovalError(f"{action} takes {takes}, not {', '.join(unknown)}")
    if any(not isinstance(v, str) for v in arguments.values()):
        raise ApprovalError(f"the arguments of {action} are strings")
    checked = {k: v.strip() for k, v in arguments.items() if v.strip()}
    try:
        (ReplyDecision if action == "reply" else Decision)(action=action, **checked)
    except ValidationError as exc:
        raise ApprovalError(f"invalid arguments for {action}: {validation_error(exc)}") from None
    if action == "retrieve" and not checked.get("query"):
        raise ApprovalError("retrieve needs a non-empty query")
    return checked


def pending_action(state: dict) -> dict:
    """What the human is asked about: the router's decision as its guards left it."""
    decision = state.get("decision", {})
    return {
        "step": decision.get("step", state.get("step_count", 0)),
        "action": state["next_action"],
        "args": dict(state.get("action_args") or {}),
        "thought": decision.get("thought") or "",
        "guard": decision.get("guard"),
    }


def approve(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    """Pause for a human's answer, then apply it: the action as chosen, with edited arguments, or rejected."""
    pending = pending_action(state)
    answer = Approval.model_validate(interrupt({**pending, "paused_at": time.time()}))
    decision, action = dict(state.get("decision", {})), pending["action"]
    if answer.decision == "approve":
        return {"approved": True, "decision": {**decision, "human": {"decision": "approve"}}}
    if answer.decision == "edit":
        args = checked_arguments(action, answer.arguments)
        human = {"decision": "edit", "proposed": pending["args"]}
        return {
            "approved": True,
            "action_args": args,
            "executed": [(action, args)],
            "decision": {**decision, "args": args, "human": human},
        }
    human = {"decision": "reject", "reason": answer.reason or ""}
    said = f"rejected by the reviewer{': ' + answer.reason if answer.reason else ''}"
    if decision.get("guard") == "budget":  # no step left to decide again: the run ends without an answer
        args = {"reason": said}
        return {
            "approved": True,
            "next_action": "abstain",
            "action_args": args,
            "decision": {**decision, "action": "abstain", "args": args, "human": {**human, "proposed": action}},
        }
    record = {**decision, "human": human, "observation": f"{action} {said}", "action_ms": 0.0, "action_llm_calls": 0}
    return {"approved": False, "decision": record, "agent_steps": [record]}


def route_after_approval(state: dict) -> str:
    """The approved action, or back to the router after a rejection."""
    return state["next_action"] if state.get("approved") else "router"
