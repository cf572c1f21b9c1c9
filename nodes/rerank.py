"""rerank: reorder the candidates with the configured reranker and keep `rerank.top_k`."""
from __future__ import annotations

from nodes.resources import Resources
from retrievers.documents import Passage


def rerank(state: dict, res: Resources) -> dict:
    candidates = [Passage.from_dict(d) for d in state.get("candidates", [])]
    kept = res.stack.reranker.run(state["question"], candidates, top_k=res.config.rerank.top_k)
    return {"reranked": [p.to_dict() for p in kept]}
