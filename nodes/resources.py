"""The heavy objects one process shares across queries: the retrieval stack and the LLM, each built on first use."""
from __future__ import annotations

from functools import cached_property

from configs.schema import SwitchyardConfig
from nodes.llm import LLM, build_llm
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

    @property
    def embedder(self):
        return self.stack.embedder
