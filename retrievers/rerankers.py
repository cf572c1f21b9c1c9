"""Rerankers behind one interface: `run(query, passages, top_k) -> passages`, best first.

- `none`: keep the fused order.
- `cross_encoder`: a sentence-transformers CrossEncoder from a local folder (or a model already in the local
  Hugging Face cache); a configured model that is not on disk is a clear error, never a download.
- `dense_rescore`: a second-opinion score from an embedding model over the candidates' full text, convexly
  combined with the fused score (min-max normalised over the candidate list).
- `llm`: the LLM rates each candidate 0-10 for the query (one structured call per passage).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from switchyard.errors import RerankerError
from switchyard.extras import needs_extra
from switchyard.llm.client import LLM, judge_passages
from switchyard.llm.prompts import RERANK_RELEVANCE
from switchyard.retrievers.documents import Passage, search_text
from switchyard.retrievers.fusion import min_max
from switchyard.retrievers.lazy import Lazy
from switchyard.run_context import RunContext


def _ordered(passages: list[Passage], scores: list[float], name: str, top_k: int) -> list[Passage]:
    for p, s in zip(passages, scores):
        p.scores[name] = float(s)
        p.score = float(s)
    ranked = sorted(passages, key=lambda p: (-p.score, p.chunk_id))
    for rank, p in enumerate(ranked, start=1):
        p.ranks[name] = rank
    return ranked[:top_k]


class NoReranker:
    name = "none"

    def __init__(self, top_k: int = 5):
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.top_k = top_k

    def run(
        self, query: str, passages: list[Passage], top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        return passages[: top_k or self.top_k]


class CrossEncoderReranker:
    name = "cross_encoder"

    def __init__(self, model: str, top_k: int = 5, batch_size: int = 32):
        if not model:
            raise RerankerError("rerank.method=cross_encoder needs rerank.model (a local folder or a cached model)")
        if top_k < 1 or batch_size < 1:
            raise ValueError("top_k and batch_size must be >= 1")
        self.model_name = model
        self.top_k = top_k
        self.batch_size = batch_size
        self._model = Lazy(self._load)
        self._predict_lock = threading.Lock()

    def _load(self):
        with needs_extra("torch", "rerank.method: cross_encoder"):
            from sentence_transformers import CrossEncoder

        local = Path(self.model_name).expanduser()
        try:
            if local.is_dir():
                return CrossEncoder(str(local), device="cpu")
            return CrossEncoder(self.model_name, device="cpu", local_files_only=True)
        except Exception as exc:
            raise RerankerError(
                f"cross-encoder {self.model_name!r} is configured but not available locally "
                f"({type(exc).__name__}); give a local model folder in rerank.model or set rerank.method=none"
            ) from None

    @property
    def model(self):
        return self._model.get()

    def warm_up(self) -> None:
        self._model.get()

    def run(
        self, query: str, passages: list[Passage], top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        if not passages:
            return []
        model = self.model
        with self._predict_lock:  # one tokenizer, one model: calls from several runs take turns
            scores = model.predict(
                [(query, p.text) for p in passages], batch_size=self.batch_size, show_progress_bar=False
            )
        return _ordered(passages, list(np.asarray(scores, dtype=float)), self.name, top_k or self.top_k)


class DenseRescoreReranker:
    """score = (1 - weight) * minmax(fused) + weight * minmax(cosine(query, passage) under `embedder`)."""

    name = "dense_rescore"

    def __init__(self, embedder, top_k: int = 5, weight: float = 0.5):
        if not 0 <= weight <= 1:
            raise ValueError("weight must be in [0, 1]")
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.embedder = embedder
        self.top_k = top_k
        self.weight = weight

    def run(
        self, query: str, passages: list[Passage], top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        if not passages:
            return []
        vectors = self.embedder.run([query] + [search_text(p.title, p.text) for p in passages])
        cosine = (vectors[1:] @ vectors[0]).tolist()
        prior = min_max([p.score for p in passages])
        second = min_max(cosine)
        scores = [(1 - self.weight) * a + self.weight * b for a, b in zip(prior, second)]
        for p, c in zip(passages, cosine):
            p.scores["rescore_cosine"] = float(c)
        return _ordered(passages, scores, self.name, top_k or self.top_k)


class Relevance(BaseModel):
    relevant: bool
    score: int = Field(ge=0, le=10, description="0 = unrelated, 10 = answers the question")


class LLMReranker:
    """Scores each candidate with the LLM (`Relevance`, 0-10); `get_llm` is called on first use, so a pipeline
    whose reranker is never run never loads a model."""

    name = "llm"

    def __init__(self, get_llm: Callable[[], LLM] | None, top_k: int = 5):
        if get_llm is None:
            raise RerankerError("rerank.method=llm needs an LLM backend (available in the graph pipeline)")
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.get_llm = get_llm
        self.top_k = top_k

    def run(
        self, query: str, passages: list[Passage], top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        if not passages:
            return []
        judged = judge_passages(
            self.get_llm(),
            RERANK_RELEVANCE,
            query,
            [p.text for p in passages],
            Relevance,
            Relevance(relevant=False, score=0),
            run=run,
        )
        return _ordered(passages, [float(j.score) for j in judged], self.name, top_k or self.top_k)
