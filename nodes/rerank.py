"""rerank: reorder the candidates with the configured reranker and keep `rerank.top_k`."""
from __future__ import annotations

from langgraph.runtime import Runtime

from llm.context import RunContext
from nodes.resources import Resources
from retrievers.documents import Passage


def rerank(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    candidates = [Passage.from_dict(d) for d in state.get("candidates", [])]
    kept = res.stack.retrieval.rerank(state["question"], candidates, run=runtime.context)
    return {"reranked": [p.to_dict() for p in kept]}
