"""The heavy objects one process shares across queries: the retrieval stack and the LLM, each built on first use."""
from __future__ import annotations

from functools import cached_property

import numpy as np

from configs.schema import SwitchyardConfig
from nodes.llm import LLM, Usage, build_llm
from retrievers.pipeline import RetrievalStack


class Resources:
    def __init__(self, config: SwitchyardConfig, llm: LLM | None = None, stack: RetrievalStack | None = None):
        self.config = config
        if llm is not None:
            self.__dict__["llm"] = llm
        if stack is not None:
            self.__dict__["stack"] = stack

    @cached_property
    def llm(self) -> LLM:
        return build_llm(self.config.llm)

    @cached_property
    def stack(self) -> RetrievalStack:
        from nodes.rerank import llm_relevance_scorer

        return RetrievalStack(self.config, llm_score_fn=llm_relevance_scorer(self))

    def llm_usage(self) -> Usage:
        """A snapshot of the LLM's usage so far, without building the LLM (no-LLM pipelines never load one)."""
        return self.__dict__["llm"].usage.snapshot() if "llm" in self.__dict__ else Usage()

    def llm_parse_failures(self) -> int:
        return self.__dict__["llm"].parse_failures if "llm" in self.__dict__ else 0

    @property
    def embedder(self):
        return self.stack.embedder

    def passage_vectors(self, passages: list[dict]) -> np.ndarray:
        """Vectors of retrieved passages, read from the index instead of embedding them again."""
        from retrievers.store import search_text

        stored = self.stack.store.vectors([p["chunk_id"] for p in passages])
        missing = [p for p in passages if p["chunk_id"] not in stored]
        if missing:  # e.g. deleted since retrieval
            fresh = self.embedder.run([search_text(p["title"], p["text"]) for p in missing])
            stored.update({p["chunk_id"]: v for p, v in zip(missing, fresh)})
        return np.stack([stored[p["chunk_id"]] for p in passages]) if passages else np.zeros((0, 1), np.float32)
