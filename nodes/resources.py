"""The heavy objects runs share.

`SharedModels` is the one way to share loaded models between pipelines (the CLI, the service's pipelines per
config and collection, an evaluation's configs): one embedder per distinct `embedding:` section and one LLM per
distinct `llm:` section, built once under a lock, whoever asks first. Give every `Pipeline` (or `Resources`) of a
process the same `SharedModels`:

    models = SharedModels()
    fixed = Pipeline(load_config("configs/fixed.yaml"), models=models)
    agent = Pipeline(load_config("configs/agent.yaml"), models=models)   # same MiniLM and SmolLM2 instances

`Resources` is what the nodes of one pipeline use: its config, its retrieval stack and its LLM, each built on first
use (an LLM or embedder object is cheap; its weights load on first call or in `warm_up()`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from pydantic import BaseModel

from switchyard.configs.schema import EmbeddingConfig, LLMConfig, SwitchyardConfig, VectorFieldConfig
from switchyard.llm.client import LLM
from switchyard.llm.factory import build_llm
from switchyard.retrievers.documents import Passage, search_text
from switchyard.retrievers.embedder import TextEmbedder
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.stack import RetrievalStack, field_embedder_settings
from switchyard.retrievers.store import ChunkFetch
from switchyard.retrievers.vector_recording import build_embedder

T = TypeVar("T")


class SharedModels:
    """Loaded models keyed by the config section that builds them, in full. Thread-safe."""

    def __init__(self):
        self._models: dict[str, object] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(section: BaseModel) -> str:
        return f"{type(section).__name__}:{section.model_dump_json()}"

    def _get(self, section: BaseModel, build: Callable[[], T], kind: str = "") -> T:
        key = kind + self.key(section)
        with self._lock:
            if key not in self._models:
                self._models[key] = build()
            return self._models[key]  # type: ignore[return-value]

    def embedder(self, config: EmbeddingConfig) -> TextEmbedder:
        return self._get(config, lambda: build_embedder(**config.model_dump()))

    def field_embedder(self, config: EmbeddingConfig, field: VectorFieldConfig) -> TextEmbedder:
        """A vector field's model (retrieve.retrievers) on `config`'s runtime: one for every pipeline with that
        runtime and model."""
        settings = field_embedder_settings(config.model_dump(), field)
        return self._get(config, lambda: build_embedder(**settings), kind=self._field_kind(settings))

    @staticmethod
    def _field_kind(settings: dict) -> str:
        return f"field:{settings['model']}:{settings['batch_size']}:"

    def llm(self, config: LLMConfig) -> LLM:
        return self._get(config, lambda: build_llm(config))

    def provide(
        self,
        section: EmbeddingConfig | LLMConfig,
        model: TextEmbedder | LLM,
        field: VectorFieldConfig | None = None,
    ) -> None:
        """Share an already built model for `section` (e.g. a test's session-wide embedder); with `field`, as that
        vector field's model on the `section` runtime."""
        kind = "" if field is None else self._field_kind(field_embedder_settings(section.model_dump(), field))
        with self._lock:
            self._models[kind + self.key(section)] = model

    def loaded(self) -> list[object]:
        with self._lock:
            return list(self._models.values())


class Resources:
    """The shared heavy objects of one config: its retrieval stack and its LLM, from `models`."""

    def __init__(self, config: SwitchyardConfig, models: SharedModels | None = None):
        self.config = config
        self.models = models or SharedModels()
        self._llm = Lazy(lambda: self.models.llm(config.llm))
        self._stack = Lazy(
            lambda: RetrievalStack(
                config,
                get_llm=lambda: self.llm,
                embedder=self.models.embedder(config.embedding),
                field_embedders={
                    name: self.models.field_embedder(config.embedding, f)
                    for name, f in config.retrieve.retrievers.fields().items()
                    if f.enabled
                },
            )
        )

    @property
    def llm(self) -> LLM:
        return self._llm.get()

    @property
    def stack(self) -> RetrievalStack:
        return self._stack.get()

    @property
    def embedder(self) -> TextEmbedder:
        return self.stack.embedder

    def close(self) -> None:
        """Stop the threads the retrieval stack started (the models stay loaded, the pipeline usable)."""
        if self._stack.built:
            self.stack.close()

    def warm_up(self) -> None:
        """Load every model and open the index now, instead of on the first question."""
        self.stack.warm_up()
        if self.config.uses_llm():
            self.llm.warm_up()

    def passage_vectors(self, passages: list[Passage]) -> np.ndarray:
        """Vectors of retrieved passages, read from the index instead of embedding them again."""
        stored = ChunkFetch(self.stack.store).vectors([p.chunk_id for p in passages])
        missing = [p for p in passages if p.chunk_id not in stored]
        if missing:  # e.g. deleted since retrieval
            fresh = self.embedder.run([search_text(p.title, p.text) for p in missing])
            stored.update({p.chunk_id: v for p, v in zip(missing, fresh)})
        return np.stack([stored[p.chunk_id] for p in passages]) if passages else np.zeros((0, 1), np.float32)
