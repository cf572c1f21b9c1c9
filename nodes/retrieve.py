"""retrieve: the one retrieval path (retrievers/search.py) for every query of the round, with the run's filter."""

from __future__ import annotations

from langgraph.runtime import Runtime

from switchyard.nodes.contextualize import search_text
from switchyard.nodes.resources import Resources
from switchyard.run_context import RunContext


def retrieve(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    kept = res.stack.retrieval.run(
        state.get("queries") or [search_text(state)], where=state.get("where"), run=runtime.context
    )
    return {"candidates": kept, "retrieved": [p.doc_id for p in kept]}
