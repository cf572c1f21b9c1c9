"""Hybrid retrieval: run the lexical and dense retrievers, then fuse their rankings (see retrievers.fusion)."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

from switchyard.configs.schema import AdaptiveSignal, FusionMethod, Normalization
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.filters import Clause
from switchyard.retrievers.fusion import fuse


class HybridRetriever:
    """Runs each configured retriever with its own top_k, at the same time, and fuses the lists; `top_k` fused
    passages come out.

    The retrievers of one query run at once: LanceDB's full-text and vector searches and the ONNX/OpenVINO query
    encoder release the GIL, so a hybrid query costs about its slowest retriever, not their sum (bench/scale.py).
    The calling thread runs the first retriever itself; the others run on this object's own pool, started on the
    first query (never at import) and stopped by `close()` (or when the object is collected)."""

    POOL_THREADS = 8  # a full pool only delays: runs in flight share it

    name = "hybrid"

    def __init__(
        self,
        retrievers: list,
        method: FusionMethod = "convex",
        weights: dict[str, float] | None = None,
        rrf_k: float = 60.0,
        top_k: int = 20,
        normalization: Normalization = "minmax",
        adaptive_power: float = 0.0,
        adaptive_depth: int = 100,
        adaptive_signal: AdaptiveSignal = "confidence",
        adaptive_k: int = 3,
    ):
        if not retrievers:
            raise ValueError("at least one retriever is needed")
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.retrievers = retrievers
        self.method = method
        self.weights = dict(weights or {})
        self.rrf_k = rrf_k
        self.top_k = top_k
        self.normalization = normalization
        self.adaptive_power = adaptive_power
        self.adaptive_depth = adaptive_depth
        self.adaptive_signal = adaptive_signal
        self.adaptive_k = adaptive_k
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.POOL_THREADS, thread_name_prefix="hybrid")
            return self._pool

    def close(self) -> None:
        """Stop the pool's threads (a later query starts a new pool)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def run_each(self, query: str, where: list[Clause] | None = None) -> dict[str, list[Passage]]:
        first, *others = self.retrievers
        pool = self._executor() if others else None
        futures = (
            [pool.submit(contextvars.copy_context().run, r.run, query, where=where) for r in others]
            if pool is not None
            else []
        )
        ranked = {first.name: first.run(query, where=where)}
        for r, future in zip(others, futures):
            ranked[r.name] = future.result()
        return ranked

    def fuse(self, ranked: dict[str, list[Passage]], top_k: int | None = None) -> list[Passage]:
        if len(ranked) == 1:  # a single retriever: keep its own scores and order
            ((name, passages),) = ranked.items()
            fused = []
            for rank, p in enumerate(passages, start=1):
                p.scores[name], p.ranks[name] = p.score, rank
                fused.append(p)
        else:
            fused = fuse(
                ranked,
                method=self.method,
                weights=self.weights,
                rrf_k=self.rrf_k,
                normalization=self.normalization,
                adaptive_power=self.adaptive_power,
                adaptive_depth=self.adaptive_depth,
                adaptive_signal=self.adaptive_signal,
                adaptive_k=self.adaptive_k,
            )
        return fused[: top_k or self.top_k]

    def run(self, query: str, top_k: int | None = None, where: list[Clause] | None = None) -> list[Passage]:
        return self.fuse(self.run_each(query, where), top_k)
