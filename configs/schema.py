"""The pipeline config schema. Every section forbids unknown keys so a typo is an error, not a silent default.

This module imports nothing from the rest of Switchyard; every layer imports it.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StoreConfig(_Section):
    """Where the index lives. `uri` is a LanceDB URI: a local folder, or `s3://…` / `gs://…` passed through as is."""

    uri: str = ".switchyard/index"
    collection: str = "default"
    vector_index_min_rows: int = Field(
        50_000, ge=0, description="build an ANN (IVF-HNSW) vector index from this many chunks on; 0 = never")

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v):
            raise ValueError("collection names use letters, digits, '_', '-', '.' (max 64 chars)")
        return v


class IngestConfig(_Section):
    chunk_size: int = Field(256, ge=16, le=4096, description="tokens per chunk (embedding-model tokenizer)")
    chunk_overlap: int = Field(32, ge=0)
    batch_docs: int = Field(64, ge=1, description="documents written per atomic commit")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "IngestConfig":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        return self


class EmbeddingConfig(_Section):
    model: str = Field("minilm", description="'minilm' (the packaged all-MiniLM-L6-v2) or a local model folder")
    batch_size: int = Field(32, ge=1)
    device: str = "cpu"


class BM25Config(_Section):
    backend: Literal["lancedb", "rank_bm25"] = "lancedb"
    top_k: int = Field(100, ge=1)
    k1: float = Field(1.2, gt=0, description="rank_bm25 backend only (LanceDB FTS hides k1/b)")
    b: float = Field(0.75, ge=0, le=1, description="rank_bm25 backend only")
    stem: bool = True
    remove_stop_words: bool = True


class DenseConfig(_Section):
    top_k: int = Field(100, ge=1)


class RetrieversConfig(_Section):
    bm25: BM25Config = BM25Config()
    dense: DenseConfig = DenseConfig()


class FusionConfig(_Section):
    method: Literal["rrf", "convex"] = "convex"
    rrf_k: float = Field(60.0, ge=0, description="RRF constant k in w / (k + rank), ranks 1-based")
    weights: dict[str, float] = Field(default_factory=lambda: {"bm25": 0.5, "dense": 0.5})

    @field_validator("weights")
    @classmethod
    def _known_retrievers(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = set(v) - {"bm25", "dense"}
        if unknown:
            raise ValueError(f"unknown retriever(s) in weights: {sorted(unknown)}; known: bm25, dense")
        if any(w < 0 for w in v.values()) or not any(w > 0 for w in v.values()):
            raise ValueError("weights must be >= 0 with at least one > 0")
        return v


class RetrieveConfig(_Section):
    mode: Literal["hybrid", "bm25", "dense"] = "hybrid"
    retrievers: RetrieversConfig = RetrieversConfig()
    fusion: FusionConfig = FusionConfig()
    top_k: int = Field(20, ge=1, description="passages handed to the reranker")


class RerankConfig(_Section):
    method: Literal["none", "cross_encoder", "dense_rescore", "llm"] = "none"
    model: str | None = Field(None, description="cross_encoder: model name or local path; dense_rescore: embedding model")
    top_k: int = Field(5, ge=1, description="passages kept after reranking")
    weight: float = Field(0.5, ge=0, le=1, description="dense_rescore: weight of the new score against the fused one")
    batch_size: int = Field(32, ge=1)


class SwitchyardConfig(_Section):
    store: StoreConfig = StoreConfig()
    ingest: IngestConfig = IngestConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    retrieve: RetrieveConfig = RetrieveConfig()
    rerank: RerankConfig = RerankConfig()
