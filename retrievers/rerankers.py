"""Rerankers behind one interface: `run(query, passages, top_k) -> passages`, best first.

- `none`: keep the fused order.
- `cross_encoder`: a cross-encoder that reads query and passage together. `model` is a `cross-encoder-onnx/1` file
  (retrievers/cross_encoder_onnx.py: ONNX Runtime, no PyTorch), or a sentence-transformers CrossEncoder folder or a
  model already in the local Hugging Face cache (PyTorch); unset, the cross-encoder Switchyard ships. A configured
  model that is not on disk is a clear error, never a download. Its score is the model's raw logit, or with
  `fused_weight` > 0 a blend of it with the fused score (both min-max normalised over the candidate list).
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
from switchyard.retrievers.cross_encoder_onnx import OnnxCrossEncoder, is_onnx_file
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


def blend(new: list[float], new_weight: float, fused: list[float], fused_weight: float) -> list[float]:
    """new_weight * minmax(new) + fused_weight * minmax(fused), over one candidate list (the weights sum to 1)."""
    return [new_weight * a + fused_weight * b for a, b in zip(min_max(new), min_max(fused))]


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


# The cross-encoder Switchyard ships, used when rerank.model is unset: a `cross-encoder-onnx/1` file inside the package
# (package data of switchyard.retrievers) and its sha256, verified when it loads. Trained by bench/train_reranker.py
# from the packaged MiniLM on training splits only (docs/reranker-data-card.md); int8, 24.1 MB.
SHIPPED_CROSS_ENCODER = Path(__file__).resolve().parent / "models" / "cross-encoder.onnx"
SHIPPED_CROSS_ENCODER_SHA256: str | None = "ea423ad381b4a9c06d65f0154bb298cda5226807fb3d5c3704fd91f7ff0779fc"


def shipped_cross_encoder() -> tuple[Path, str]:
    """(path, sha256) of the shipped cross-encoder, or one clear RerankerError when it is not installed."""
    if SHIPPED_CROSS_ENCODER_SHA256 is None or not SHIPPED_CROSS_ENCODER.is_file():
        raise RerankerError(
            "rerank.method=cross_encoder with rerank.model unset uses the cross-encoder shipped with Switchyard, which "
            "is not in this installation; set rerank.model to a cross-encoder .onnx file (export_cross_encoder) or a "
            "sentence-transformers CrossEncoder folder"
        )
    return SHIPPED_CROSS_ENCODER, SHIPPED_CROSS_ENCODER_SHA256


class _SentenceTransformersCrossEncoder:
    """A sentence-transformers CrossEncoder (PyTorch) from a local folder or the local Hugging Face cache, scoring
    by its raw logit like the ONNX files. One at a time: its Hugging Face tokenizer is not safe to share."""

    def __init__(self, name: str, batch_size: int):
        self.name = name
        self.batch_size = batch_size
        self._model = Lazy(self._load)
        self._predict_lock = threading.Lock()

    def _load(self):
        with needs_extra("torch", "rerank.method: cross_encoder with a sentence-transformers model"):
            import torch
            from sentence_transformers import CrossEncoder

        local = Path(self.name).expanduser()
        try:
            if local.is_dir():
                model = CrossEncoder(str(local), device="cpu", activation_fn=torch.nn.Identity())
            else:
                model = CrossEncoder(self.name, device="cpu", local_files_only=True, activation_fn=torch.nn.Identity())
        except Exception as exc:
            raise RerankerError(
                f"cross-encoder {self.name!r} is configured but not available locally "
                f"({type(exc).__name__}); give a cross-encoder .onnx file or a local model folder in rerank.model, "
                "or set rerank.method=none"
            ) from None
        return model

    def warm_up(self) -> None:
        self._model.get()

    def predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        model = self._model.get()
        with self._predict_lock:
            scores = model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs))


class CrossEncoderReranker:
    """Reranks by a cross-encoder's score of (query, the passage's title and text, as BM25 and the embedder see it). `model`: a `cross-encoder-onnx/1` file (by its
    `.onnx` suffix; `sha256`, when given, is verified on load), a sentence-transformers CrossEncoder folder or cached
    model, or None/"" for the shipped cross-encoder. `threads`: ONNX Runtime intra-op threads (None: one per core).
    Cheap to construct; the model loads in `warm_up()` or on first use. Safe to share between threads."""

    name = "cross_encoder"

    def __init__(
        self,
        model: str | None = None,
        top_k: int = 5,
        batch_size: int = 32,
        threads: int | None = None,
        sha256: str | None = None,
        fused_weight: float = 0.0,
    ):
        if top_k < 1 or batch_size < 1:
            raise ValueError("top_k and batch_size must be >= 1")
        if not 0 <= fused_weight <= 1:
            raise ValueError("fused_weight must be in [0, 1]")
        self.top_k = top_k
        self.batch_size = batch_size
        self.fused_weight = fused_weight
        self.scorer: OnnxCrossEncoder | _SentenceTransformersCrossEncoder
        file, sha256 = shipped_cross_encoder() if not model else (model, sha256)
        self.model_name = str(file)
        if not model or is_onnx_file(model):
            self.scorer = OnnxCrossEncoder(file, sha256=sha256, batch_size=batch_size, threads=threads)
        else:
            self.scorer = _SentenceTransformersCrossEncoder(model, batch_size)

    def warm_up(self) -> None:
        self.scorer.warm_up()

    def run(
        self, query: str, passages: list[Passage], top_k: int | None = None, run: RunContext | None = None
    ) -> list[Passage]:
        if not passages:
            return []
        logits = self.scorer.predict([(query, search_text(p.title, p.text)) for p in passages]).tolist()
        if self.fused_weight > 0:
            for p, logit in zip(passages, logits):
                p.scores["cross_encoder_logit"] = float(logit)
            fused = [p.score for p in passages]
            scores = blend(logits, 1 - self.fused_weight, fused, self.fused_weight)
            return _ordered(passages, scores, self.name, top_k or self.top_k)
        return _ordered(passages, logits, self.name, top_k or self.top_k)


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
        scores = blend(cosine, self.weight, [p.score for p in passages], 1 - self.weight)
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
