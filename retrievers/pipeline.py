"""Builds the retrieval stack from a config, once per process: store, embedder, retrievers, fusion, reranker."""
from __future__ import annotations

from typing import Callable

from switchyard.configs.schema import SwitchyardConfig
from switchyard.llm.client import LLM
from switchyard.llm.context import RunContext
from switchyard.retrievers.bm25 import LanceBM25Retriever, RankBM25Retriever
from switchyard.retrievers.chunking import Chunker, SentenceWindows
from switchyard.retrievers.dense import DenseRetriever
from switchyard.retrievers import e5_model
from switchyard.retrievers.embedder import Embedder, SentenceModelSpec
from switchyard.retrievers.hybrid import HybridRetriever
from switchyard.retrievers.ingest import Ingestor, corpus_collection
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.query_adapter import QueryAdapter
from switchyard.retrievers.rerankers import CrossEncoderReranker, DenseRescoreReranker, LLMReranker, NoReranker
from switchyard.retrievers.search import Retrieval, SearchResult, Where
from switchyard.retrievers.store import E5_COLUMN, IndexStore, VectorIndexSpec


class RetrievalStack:
    """The heavy objects for one config and collection; create once, reuse for every query, share between threads.

    Each part is built on first use, once (under a lock). Pass an already loaded `embedder` (and `e5_embedder`) to
    share one model between stacks (another collection, an evaluation's configs), and `get_llm` for the `llm`
    reranker (called on first use, so a stack whose reranker never runs loads no LLM). Every search goes through
    `retrieval` (retrievers/search.py), the one retrieval path."""

    def __init__(self, config: SwitchyardConfig, collection: str | None = None,
                 get_llm: Callable[[], LLM] | None = None, embedder: Embedder | None = None,
                 e5_embedder: Embedder | None = None):
        self.config = config
        self.collection = collection or config.store.collection
        self._get_llm = get_llm
        e = config.embedding
        self._embedder = Lazy(lambda: Embedder(**e.model_dump()), embedder)
        self._e5_embedder = Lazy(lambda: Embedder(**e5_model.embedder_settings(e.model_dump())), e5_embedder)
        self._store = Lazy(self._build_store)
        self._chunker = Lazy(lambda: Chunker(config.ingest.chunk_size, config.ingest.chunk_overlap,
                                             self.embedder.tokenizer_file))
        self._adapter = Lazy(self._build_adapter)
        self._retriever = Lazy(self._build_retriever)
        self._reranker = Lazy(self._build_reranker)
        self._retrieval = Lazy(lambda: Retrieval(self.retriever, self.reranker, top_k=config.retrieve.top_k,
                                                 rerank_top_k=config.rerank.top_k,
                                                 rrf_k=config.retrieve.fusion.rrf_k,
                                                 collection=self.collection))

    @property
    def embedder(self) -> Embedder:
        return self._embedder.get()

    @property
    def e5_embedder(self) -> Embedder:
        """multilingual-e5-small (retrieve.retrievers.e5), loaded on first use."""
        return self._e5_embedder.get()

    @property
    def store(self) -> IndexStore:
        return self._store.get()

    @property
    def chunker(self) -> Chunker:
        return self._chunker.get()

    @property
    def retriever(self) -> HybridRetriever:
        return self._retriever.get()

    @property
    def reranker(self):
        return self._reranker.get()

    @property
    def retrieval(self) -> Retrieval:
        return self._retrieval.get()

    def warm_up(self) -> None:
        """Load the models and open the collection now (a service calls this at start)."""
        self.embedder.warm_up()
        if self.config.retrieve.retrievers.e5.enabled:
            self.e5_embedder.warm_up()
        if self.store.exists():
            self.store.table()
        self.retriever
        reranker_warm_up = getattr(self.reranker, "warm_up", None)
        if reranker_warm_up is not None:
            reranker_warm_up()

    def _build_store(self) -> IndexStore:
        bm25 = self.config.retrieve.retrievers.bm25
        return IndexStore(self.config.store.uri, self.collection, embedding_model=self.config.embedding.model,
                          dim=self.embedder.dim, embedding_backend=self.embedder.backend,
                          fts_stem=bm25.stem, fts_remove_stop_words=bm25.remove_stop_words,
                          vector_index=VectorIndexSpec(min_rows=self.config.store.vector_index_min_rows,
                                                       **self.config.store.vector_index.model_dump()),
                          storage_options=self.config.store.storage_options, windows=window_spec(self.config),
                          e5_dim=self._e5_dim() if self.config.retrieve.retrievers.e5.enabled else None)

    def _e5_dim(self) -> int:
        # read from the model folder, without loading the model: listing or deleting documents needs no e5 weights
        return SentenceModelSpec(self.e5_embedder.model_dir).dim

    def ingestor(self, progress: bool | None = None) -> Ingestor:
        """An ingestor for this collection: with window vectors and e5 vectors if the collection has them (or, for a
        new one, if the config asks for them)."""
        spec = self.store.windows
        windows = SentenceWindows(*spec, self.embedder.tokenizer_file) if spec else None
        return Ingestor(self.store, self.embedder, self.chunker, batch_docs=self.config.ingest.batch_docs,
                        progress=progress, windows=windows, e5=self.e5_embedder if self.store.has_e5 else None)

    def bm25(self):
        c = self.config.retrieve.retrievers.bm25
        if c.backend == "rank_bm25":
            return RankBM25Retriever(self.store, top_k=c.top_k, k1=c.k1, b=c.b, stem=c.stem,
                                     remove_stop_words=c.remove_stop_words, max_chunks=c.max_chunks)
        return LanceBM25Retriever(self.store, top_k=c.top_k)

    def dense(self) -> DenseRetriever:
        c = self.config.retrieve.retrievers.dense
        return DenseRetriever(self.store, self.embedder, top_k=c.top_k,
                              adapter=self._adapter.get() if c.query_adapter else None)

    def e5(self) -> DenseRetriever:
        return DenseRetriever(self.store, self.e5_embedder, top_k=self.config.retrieve.retrievers.e5.top_k,
                              name="e5", column=E5_COLUMN, query_prefix=e5_model.QUERY_PREFIX)

    def _build_adapter(self) -> QueryAdapter:
        adapter = QueryAdapter(self.config.retrieve.retrievers.dense.query_adapter)
        adapter.check(self.config.embedding.model, self.embedder.dim)
        return adapter

    def _build_retriever(self) -> HybridRetriever:
        r = self.config.retrieve
        if r.mode == "hybrid":
            parts = [self.bm25(), self.dense()] + ([self.e5()] if r.retrievers.e5.enabled else [])
        else:
            parts = [{"bm25": self.bm25, "dense": self.dense, "e5": self.e5}[r.mode]()]
        return HybridRetriever(parts, top_k=r.top_k, **r.fusion.model_dump())

    def _build_reranker(self):
        c = self.config.rerank
        if c.method == "cross_encoder":
            return CrossEncoderReranker(c.model or "", top_k=c.top_k, batch_size=c.batch_size)
        if c.method == "dense_rescore":
            embedder = self.embedder if not c.model else Embedder(c.model, batch_size=c.batch_size)
            return DenseRescoreReranker(embedder, top_k=c.top_k, weight=c.weight)
        if c.method == "llm":
            return LLMReranker(self._get_llm, top_k=c.top_k)
        return NoReranker(top_k=c.top_k)

    def close(self) -> None:
        """Stop the threads this stack started (the hybrid retriever's pool); it stays usable."""
        if self._retriever.built:
            self._retriever.get().close()

    def search(self, query: str, top_k: int | None = None, where: Where = None, rerank: bool = True,
               groups: tuple[str, ...] | None = None) -> SearchResult:
        """`retrieval.search` for one query (`groups`: only chunks they may read; None: all); a missing collection
        is a clear error before any model loads."""
        self.store.table()
        return self.retrieval.search(query, where=where, top_k=top_k, rerank=rerank, run=RunContext(groups=groups))


def window_spec(config: SwitchyardConfig) -> tuple[int, int] | None:
    """(window_tokens, window_overlap) a new collection is built with, None when sentence windows are off."""
    i = config.ingest
    return (i.window_tokens, i.window_overlap) if i.window_tokens else None


def corpus_collection_for(config: SwitchyardConfig, paths: list, prefix: str = "eval") -> str:
    """The cached collection of a corpus under the config's index-shaping settings (retrievers/ingest.py
    corpus_collection): chunking, embedding model, windows, e5 vectors, the vector recording it is built from."""
    i = config.ingest
    return corpus_collection(paths, i.chunk_size, i.chunk_overlap, config.embedding.model, prefix=prefix,
                             windows=window_spec(config), e5=config.retrieve.retrievers.e5.enabled,
                             vectors=config.embedding.vector_cache)

