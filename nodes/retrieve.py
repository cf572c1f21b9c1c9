"""retrieve: hybrid search for every query of the round; several queries are fused by RRF."""
from __future__ import annotations

from nodes.resources import Resources
from retrievers.filters import parse_filter
from retrievers.fusion import reciprocal_rank_fusion


def retrieve(state: dict, res: Resources) -> dict:
    cfg = res.config.retrieve
    queries = state.get("queries") or [state["question"]]
    where = parse_filter(state.get("where"))
    ranked = {f"q{i}": res.stack.retriever.run(q, where=where) for i, q in enumerate(queries)}
    if len(ranked) == 1:
        (passages,) = ranked.values()
    else:
        passages = reciprocal_rank_fusion(ranked, k=cfg.fusion.rrf_k)
    kept = passages[: cfg.top_k]
    return {"candidates": [p.to_dict() for p in kept], "retrieved": [p.doc_id for p in kept]}
