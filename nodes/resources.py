"""The heavy objects one process shares across runs: the retrieval stack and the LLM, each built once on first use
(under a lock, so runs arriving together never build two), or all at once by `warm_up()`."""
from __future__ import annotations

import numpy as np

from configs.schema import SwitchyardConfig
from nodes.llm import LLM, build_llm, llm_relevance_scorer
from retrievers.documents import search_text
from retrievers.embedder import Embedder
from retrievers.lazy import Lazy
from retrievers.pipeline import RetrievalStack


class Resources:
    """Pass already loaded objects to share them: `llm`, a whole `stack`, or just the `embedder` of a new stack."""

    def __init__(self, config: SwitchyardConfig, llm: LLM | None = None, stack: RetrievalStack | None = None,
                 embedder: Embedder | None = None):
        self.config = config
        self._llm = Lazy(lambda: build_llm(config.llm), llm)
        self._stack = Lazy(lambda: RetrievalStack(config, llm_score_fn=llm_relevance_scorer(lambda: self.llm),
                                                  embedder=embedder), stack)

    @property
    def llm(self) -> LLM:
        return self._llm.get()

    @property
    def llm_built(self) -> bool:
        return self._llm.built

    @property
    def stack(self) -> RetrievalStack:
        return self._stack.get()

    @property
    def embedder(self):
        return self.stack.embedder

    def warm_up(self) -> None:
        """Load every model and open the index now, instead of on the first question."""
        self.stack.warm_up()
        if self.config.uses_llm():
            self.llm.warm_up()

    def passage_vectors(self, passages: list[dict]) -> np.ndarray:
        """Vectors of retrieved passages, read from the index instead of embedding them again."""
        stored = self.stack.store.vectors([p["chunk_id"] for p in passages])
        missing = [p for p in passages if p["chunk_id"] not in stored]
        if missing:  # e.g. deleted since retrieval
            fresh = self.embedder.run([search_text(p["title"], p["text"]) for p in missing])
            stored.update({p["chunk_id"]: v for p, v in zip(missing, fresh)})
        return np.stack([stored[p["chunk_id"]] for p in passages]) if passages else np.zeros((0, 1), np.float32)
