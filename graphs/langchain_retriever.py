"""A LangChain `BaseRetriever` over a Switchyard collection, so the index can serve inside other LangChain and
LangGraph apps: the search `Pipeline.search` runs (nodes/search.py `search_passages`: the config's rewrite, hybrid
retrieval, optionally the reranker), with the filter language of retrievers/filters.py
(`where="source~handbook and page=3"`). Each hit is a LangChain `Document` whose metadata carries the passage's
doc_id, chunk_id, title, source, page, page_end and score.

    retriever = SwitchyardRetriever.from_index(".switchyard/index", top_k=4)
    docs = retriever.invoke("Who patented the knuckle coupler?", where="source~couplers")
    retriever = SwitchyardRetriever.from_pipeline(pipe)   # the pipeline's stack and LLM: `pipe.search`'s passages

The rewrite is the config's (`rewrite.method`): `prf` and `none` need only the stack; `llm` makes one call to the
retriever's `llm`, and without one (a bare `stack=`, `from_index` without `llm=`) searches the question as is.

`where` and `top_k` given to `invoke` override the retriever's own for that call. One retriever (and its stack) is
safe to share between threads, as `RetrievalStack` is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, field_validator

from switchyard.llm.client import LLM
from switchyard.nodes.search import search_passages  # a layer above: this module moves to graphs/ (issue 60)
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.filters import parse_filter
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import ALL, Scope

if TYPE_CHECKING:
    from switchyard.graphs.pipeline import Pipeline


def passage_document(passage: Passage) -> Document:
    return Document(
        page_content=passage.text,
        id=passage.chunk_id,
        metadata={
            "doc_id": passage.doc_id,
            "chunk_id": passage.chunk_id,
            "title": passage.title,
            "source": passage.source,
            "page": passage.page,
            "page_end": passage.page_end,
            "score": float(passage.score),
        },
    )


class SwitchyardRetriever(BaseRetriever):
    stack: RetrievalStack
    llm: LLM | None = Field(
        None, description="the LLM of an `llm` rewrite (rewrite.method); None: the question is searched as is"
    )
    top_k: int | None = Field(None, ge=1, description="documents returned; None = the config's rerank.top_k")
    where: str | None = Field(None, description="a metadata filter applied to every search")
    rerank: bool = Field(True, description="apply the config's reranker (rerank.method) to the fused candidates")
    groups: Scope = Field(
        ALL,
        description="access scope of the caller: its groups (only documents unlabelled or "
        "labelled with one of them), or ALL (the default: every document)",
    )

    @field_validator("where")
    @classmethod
    def _valid_filter(cls, where: str | None) -> str | None:
        parse_filter(where)  # a bad filter is an error when the retriever is built, not on first use
        return where

    @classmethod
    def from_index(
        cls,
        uri: str | Path,
        collection: str | None = None,
        overrides: list[str] | tuple = (),
        config_file: str | Path | None = None,
        **fields,
    ) -> SwitchyardRetriever:
        """A retriever over collection `collection` of the index at `uri`, configured like the CLI (`config_file`,
        then `overrides` as `a.b=c`)."""
        from switchyard.configs.loader import load_config

        config = load_config(config_file, [f"store.uri={uri}", *overrides])
        return cls(stack=RetrievalStack(config, collection=collection), **fields)

    @classmethod
    def from_pipeline(cls, pipeline: Pipeline, **fields) -> SwitchyardRetriever:
        """A retriever over `pipeline`'s stack and LLM: for the same query, filter and groups it returns the
        passages `pipeline.search` returns."""
        resources = pipeline.resources
        llm = resources.llm if resources.config.rewrite.method == "llm" else None  # no model object otherwise
        return cls(stack=resources.stack, llm=llm, **fields)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        where: str | None = None,
        top_k: int | None = None,
    ) -> list[Document]:
        clauses = parse_filter(self.where) + parse_filter(where)
        llm = self.llm
        result = search_passages(
            query,
            stack=self.stack,
            get_llm=(lambda: llm) if llm is not None else None,
            where=clauses,
            top_k=top_k or self.top_k,
            rerank=self.rerank,
            groups=self.groups,
        )
        return [passage_document(p) for p in result.passages]
