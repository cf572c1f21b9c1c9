"""rerank: reorder the candidates with the configured reranker and keep `rerank.top_k`."""

from __future__ import annotations

from langgraph.runtime import Runtime

from switchyard.nodes.contextualize import search_text
from switchyard.nodes.resources import Resources
from switchyard.run_context import RunContext


def rerank(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    kept = res.stack.retrieval.rerank(search_text(state), state.get("candidates", []), run=runtime.context)
    return {"reranked": kept}
