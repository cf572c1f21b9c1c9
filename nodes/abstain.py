"""abstain: the corrective loop ran out of retries; say so explicitly instead of guessing."""

from __future__ import annotations

from langgraph.runtime import Runtime

from switchyard.nodes.answer import abstention
from switchyard.nodes.resources import Resources
from switchyard.run_context import RunContext


def abstain(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    tries = state.get("attempts", 0)
    return abstention(
        res.config.answer.abstain_message,
        f"no relevant passages after {tries} retrieval round(s): {state.get('feedback', '')}",
    )
