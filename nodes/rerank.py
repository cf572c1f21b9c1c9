"""rerank: reorder the candidates with the configured reranker and keep `rerank.top_k`.

Also provides the LLM relevance scorer that the `llm` reranker method uses.
"""
from __future__ import annotations

from pydantic import BaseModel, Field

from nodes.llm import judge_passages
from nodes.resources import Resources
from retrievers.documents import Passage


class Relevance(BaseModel):
    relevant: bool
    score: int = Field(ge=0, le=10, description="0 = unrelated, 10 = answers the question")


def llm_relevance_scorer(res: Resources):
    def score(query: str, texts: list[str]) -> list[float]:
        judged = judge_passages(res.llm, "Rate how well the passage answers the question. Reply as JSON "
                                         "{\"relevant\": true/false, \"score\": 0-10}.", query, texts,
                                Relevance, Relevance(relevant=False, score=0))
        return [float(j.score) for j in judged]

    return score


def rerank(state: dict, res: Resources) -> dict:
    candidates = [Passage.from_dict(d) for d in state.get("candidates", [])]
    kept = res.stack.reranker.run(state["question"], candidates, top_k=res.config.rerank.top_k)
    return {"reranked": [p.to_dict() for p in kept]}
