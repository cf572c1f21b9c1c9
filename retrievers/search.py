"""The one retrieval path. Every caller that reads the index for a question goes through `Retrieval`: the graph's
retrieve node, every rewrite method (PRF feedback included), `switchyard search`, the HTTP service and the LangChain
retriever. It takes the queries of a round, the caller's filter and the run (`RunContext`, whose `groups` are the
caller's access scope: its groups, or `ALL`), and returns typed passages; filter and access are applied inside each
retriever's LanceDB query (so top-k is filled with passages the caller may read), never after. The injection policy
(retrievers/injection.py, `retrieve.injection_policy`) is applied to the fused list before its top-k cut. The scope is
required: no run, or a run whose `groups` is None, is an `AccessError` (closed by default).

    passages = stack.retrieval.run(["who patented the knuckle coupler"], where="source~couplers", run=RunContext())
    result = stack.retrieval.search(question, queries, where=..., rerank=True, run=run)   # + the reranker
"""

from __future__ import annotations

import json
import time
from copy import copy
from dataclasses import dataclass, field

from switchyard import tracing
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.filters import Clause, parse_filter, scope_clauses
from switchyard.retrievers.fusion import reciprocal_rank_fusion
from switchyard.retrievers.hybrid import HybridRetriever
from switchyard.retrievers.injection import DEFAULT_THRESHOLD, apply_policy, is_flagged
from switchyard.run_context import RunContext

Where = str | list[Clause] | None


@dataclass
class SearchResult:
    passages: list[Passage]  # reranked, best first
    candidates: list[Passage] = field(default_factory=list)  # the fused list before reranking
    timings_ms: dict[str, float] = field(default_factory=dict)


def clauses(where: Where) -> list[Clause]:
    """A filter string (retrievers/filters.py) or already parsed clauses, as clauses."""
    return parse_filter(where) if isinstance(where, str) or where is None else list(where)


class Retrieval:
    """Hybrid search for the queries of one round (several queries are fused by RRF, `rrf_k`), then, for `search`,
    the configured reranker. Holds no per-call state: safe to share between threads."""

    def __init__(
        self,
        retriever: HybridRetriever,
        reranker,
        top_k: int = 20,
        rerank_top_k: int = 5,
        rrf_k: float = 60.0,
        collection: str = "",
        injection_policy: str = "keep",
        injection_threshold: float = DEFAULT_THRESHOLD,
    ):
        self.retriever = retriever
        self.collection = collection  # named in trace spans
        self.reranker = reranker
        self.top_k = top_k
        self.rerank_top_k = rerank_top_k
        self.rrf_k = rrf_k
        self.injection_policy = injection_policy  # retrievers/injection.py: keep | demote | exclude
        self.injection_threshold = injection_threshold

    def run(
        self, queries: list[str], where: Where = None, top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        """The fused passages of a round: each query searched with the filter, several queries fused by RRF. Only
        chunks readable within `run.groups` (the caller's groups, or ALL; required): the access clause is ANDed to
        the caller's filter inside each LanceDB query, so a filter can only narrow what is read."""
        access = scope_clauses(run.groups if run is not None else None)
        if not queries:
            raise ValueError("at least one query is needed")
        k = top_k or self.top_k
        attributes = {
            tracing.SPAN_KIND: "RETRIEVER",
            "switchyard.retrieval.collection": self.collection,
            "switchyard.retrieval.k": k,
            "switchyard.retrieval.queries": len(queries),
        }
        if where:
            attributes["switchyard.retrieval.filter"] = where if isinstance(where, str) else repr(where)
        with tracing.span("retrieval", attributes) as span:
            admitted = clauses(where) + access
            ranked = {f"q{i}": self._ranked(q, admitted) for i, q in enumerate(queries)}
            if len(ranked) == 1:
                (passages,) = ranked.values()
            else:
                passages = reciprocal_rank_fusion(ranked, k=self.rrf_k)
            # flagged passages (instruction-like text) are demoted or dropped before the cut, so top-k is filled
            passages = apply_policy(passages, self.injection_policy, self.injection_threshold)[:k]
            if span.is_recording():
                span.set_attributes(_retrieval_attributes(queries, passages))
        return passages

    def _ranked(self, query: str, admitted: list[Clause]) -> list[Passage]:
        """One query's fused list. Under `demote`/`exclude`, when it holds a flagged passage, the fused list is cut
        after the policy instead of before, so the retriever's top-k is filled with unflagged passages; a list
        without one is the very list `keep` returns (clean corpora retrieve exactly as before)."""
        if self.injection_policy == "keep":
            return self.retriever.run(query, where=admitted)
        each = self.retriever.run_each(query, admitted)
        fused = self.retriever.fuse(each)
        if not any(is_flagged(p, self.injection_threshold) for p in fused):
            return fused
        longest = self.retriever.fuse(each, top_k=sum(len(v) for v in each.values()))
        return apply_policy(longest, self.injection_policy, self.injection_threshold)[: len(fused)]

    def rerank(
        self, question: str, passages: list[Passage], top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        """The configured reranker over copies of `passages` (their score dicts are not shared with the input)."""
        return self.reranker.run(question, [_copy(p) for p in passages], top_k=top_k or self.rerank_top_k, run=run)

    def search(
        self,
        question: str,
        queries: list[str] | None = None,
        where: Where = None,
        top_k: int | None = None,
        rerank: bool = True,
        run: RunContext | None = None,
    ) -> SearchResult:
        """`run(queries or [question])`, then the reranker (or the first `top_k` without it), timed."""
        t0 = time.perf_counter()
        candidates = self.run(queries or [question], where, run=run)
        t1 = time.perf_counter()
        k = top_k or self.rerank_top_k
        passages = self.rerank(question, candidates, k, run) if rerank else candidates[:k]
        t2 = time.perf_counter()
        return SearchResult(passages, candidates, {"retrieve": (t1 - t0) * 1e3, "rerank": (t2 - t1) * 1e3})


def _retrieval_attributes(queries: list[str], passages: list[Passage], top: int = 5) -> dict:
    """What a retrieval span shows of its result: the count, the top scores and documents (OpenInference names)."""
    attributes: dict = {
        "switchyard.retrieval.returned": len(passages),
        "switchyard.retrieval.top_scores": [float(p.score) for p in passages[:top]],
    }
    for i, p in enumerate(passages[:top]):
        attributes[f"retrieval.documents.{i}.document.id"] = p.chunk_id
        attributes[f"retrieval.documents.{i}.document.score"] = float(p.score)
        attributes[f"retrieval.documents.{i}.document.metadata"] = json.dumps({"doc_id": p.doc_id})
    if tracing.capture_content():
        attributes["input.value"] = " | ".join(queries)
    return attributes


def _copy(p: Passage) -> Passage:
    q = copy(p)
    q.scores, q.ranks = dict(p.scores), dict(p.ranks)
    return q
