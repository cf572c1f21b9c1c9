"""Builds the retrieval stack from a config, once per process: store, embedder, retrievers, fusion, reranker."""

from __future__ import annotations

import logging
from collections.abc import Callable

from switchyard.configs.schema import FusionConfig, SwitchyardConfig, VectorFieldConfig
from switchyard.errors import StoreError
from switchyard.llm.client import LLM
from switchyard.retrievers.bm25 import LanceBM25Retriever, RankBM25Retriever
from switchyard.retrievers.chunking import Chunker, SentenceWindows
from switchyard.retrievers.dense import DenseRetriever
from switchyard.retrievers.embedder import Embedder, SentenceModelSpec, TextEmbedder
from switchyard.retrievers.filters import scope_clauses
from switchyard.retrievers.hybrid import HybridRetriever
from switchyard.retrievers.ingest import FieldEncoder, Ingestor, corpus_collection
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.query_adapter import QueryAdapter
from switchyard.retrievers.rerankers import CrossEncoderReranker, DenseRescoreReranker, LLMReranker, NoReranker
from switchyard.retrievers.search import Retrieval, SearchResult, Where
from switchyard.retrievers.store import CHUNK_VECTORS, IndexStore
from switchyard.retrievers.vector_recording import build_embedder
from switchyard.run_context import RunContext, Scope

_log = logging.getLogger(__name__)


class RetrievalStack:
    """The heavy objects for one config and collection; create once, reuse for every query, share between threads.

    Each part is built on first use, once (under a lock). Pass an already loaded `embedder` (and `field_embedders`,
    name -> the model of that vector field) to share one model between stacks (another collection, an evaluation's configs), and `get_llm` for the `llm`
    reranker (called on first use, so a stack whose reranker never runs loads no LLM). Every search goes through
    `retrieval` (retrievers/search.py), the one retrieval path."""

    def __init__(
        self,
        config: SwitchyardConfig,
        collection: str | None = None,
        get_llm: Callable[[], LLM] | None = None,
        embedder: TextEmbedder | None = None,
        field_embedders: dict[str, TextEmbedder] | None = None,
    ):
        self.config = config
        self.collection = collection or config.store.collection
        self._get_llm = get_llm
        e = config.embedding
        self._embedder = Lazy(lambda: build_embedder(**e.model_dump()), embedder)

        def field_builder(f: VectorFieldConfig) -> Callable[[], TextEmbedder]:
            return lambda: build_embedder(**field_embedder_settings(e.model_dump(), f))

        self._field_embedders = {
            name: Lazy(field_builder(f), (field_embedders or {}).get(name))
            for name, f in config.retrieve.retrievers.fields().items()
        }
        self._store = Lazy(self._build_store)
        self._chunker = Lazy(
            lambda: Chunker(config.ingest.chunk_size, config.ingest.chunk_overlap, self.embedder.tokenizer_file)
        )
        self._adapter = Lazy(self._build_adapter)
        self._retriever = Lazy(self._build_retriever)
        self._reranker = Lazy(self._build_reranker)
        self._retrieval = Lazy(
            lambda: Retrieval(
                self.retriever,
                self.reranker,
                top_k=config.retrieve.top_k,
                rerank_top_k=config.rerank.top_k,
                rrf_k=config.retrieve.fusion.rrf_k,
                collection=self.collection,
                injection_policy=config.retrieve.injection_policy,
                injection_threshold=config.retrieve.injection_threshold,
            )
        )

    @property
    def embedder(self) -> TextEmbedder:
        return self._embedder.get()

    def field_config(self, name: str) -> VectorFieldConfig:
        """The configuration of vector field `name` (retrieve.retrievers.e5 or .vector_fields.<name>)."""
        fields = self.config.retrieve.retrievers.fields()
        if name not in fields:
            raise StoreError(
                f"collection {self.collection!r} holds {name} vectors, but the config names no vector "
                f"field {name!r} (retrieve.retrievers.vector_fields.{name})"
            )
        return fields[name]

    def field_embedder(self, name: str) -> TextEmbedder:
        """The model of vector field `name`, loaded on first use."""
        self.field_config(name)
        return self._field_embedders[name].get()

    def enabled_fields(self) -> list[str]:
        return [name for name, f in self.config.retrieve.retrievers.fields().items() if f.enabled]

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
        for name in self.enabled_fields():
            self.field_embedder(name).warm_up()
        if self.store.exists():
            self.store.table()
        self.retriever  # noqa: B018 (builds the retriever now)
        reranker_warm_up = getattr(self.reranker, "warm_up", None)
        if reranker_warm_up is not None:
            reranker_warm_up()

    def _build_store(self) -> IndexStore:
        bm25 = self.config.retrieve.retrievers.bm25
        return IndexStore(
            self.config.store.uri,
            self.collection,
            embedding_model=self.config.embedding.model,
            dim=self.embedder.dim,
            embedding_backend=self.embedder.backend,
            fts_stem=bm25.stem,
            fts_remove_stop_words=bm25.remove_stop_words,
            vector_index=self.config.store.vector_index,
            vector_index_min_rows=self.config.store.vector_index_min_rows,
            reindex_min_rows=self.config.store.reindex_min_rows,
            storage_options=self.config.store.storage_options,
            windows=window_spec(self.config),
            vector_fields={name: self._field_dim(name) for name in self.enabled_fields()},
        )

    def _field_dim(self, name: str) -> int:
        # read from the model folder, without loading the model: listing or deleting documents needs no field's weights
        return SentenceModelSpec(self.field_embedder(name).model_dir).dim

    def ingestor(self, progress: bool | None = None) -> Ingestor:
        """An ingestor for this collection: with window vectors and vector fields if the collection has them (or,
        for a new one, if the config asks for them)."""
        spec = self.store.windows
        windows = SentenceWindows(*spec, self.embedder.tokenizer_file) if spec else None
        return Ingestor(
            self.store,
            self.embedder,
            self.chunker,
            batch_docs=self.config.ingest.batch_docs,
            progress=progress,
            windows=windows,
            fields={
                name: FieldEncoder(self.field_embedder(name), self.field_config(name).passage_prefix)
                for name in self.store.vector_fields
            },
        )

    def bm25(self):
        c = self.config.retrieve.retrievers.bm25
        if c.backend == "rank_bm25":
            return RankBM25Retriever(
                self.store,
                top_k=c.top_k,
                k1=c.k1,
                b=c.b,
                stem=c.stem,
                remove_stop_words=c.remove_stop_words,
                max_chunks=c.max_chunks,
            )
        return LanceBM25Retriever(self.store, top_k=c.top_k)

    def dense(self, name: str = "dense", field: str | None = None) -> DenseRetriever:
        """Dense retrieval with the collection's model (`retrieve.retrievers.dense`): over its sentence windows where
        it has them; `chunk_dense` is the same over each chunk's own vector."""
        c = self.config.retrieve.retrievers.dense
        adapter = self._adapter.get() if c.query_adapter else None
        return DenseRetriever(self.store, self.embedder, top_k=c.top_k, adapter=adapter, name=name, field=field)

    def chunk_dense(self) -> DenseRetriever:
        """Dense retrieval over each chunk's own vector (title + text, no windows), listed as `chunk`: hybrid mode
        fuses it as a third list when `retrieve.fusion.weights.chunk` > 0. In a collection without windows it ranks
        as `dense` does."""
        return self.dense(name="chunk", field=CHUNK_VECTORS)

    def field_retriever(self, name: str) -> DenseRetriever:
        """The dense retriever of vector field `name`: its model, its column, its query prefix; listed as `name`."""
        f = self.field_config(name)
        return DenseRetriever(
            self.store, self.field_embedder(name), top_k=f.top_k, name=name, field=name, query_prefix=f.query_prefix
        )

    def _build_adapter(self) -> QueryAdapter:
        path = self.config.retrieve.retrievers.dense.query_adapter
        assert path is not None  # built only when dense.query_adapter is set (dense())
        adapter = QueryAdapter(path)
        adapter.check(self.config.embedding.model, self.embedder.dim)
        return adapter

    def fused_fields(self) -> list[str]:
        """The enabled vector fields hybrid mode fuses. A collection built without e5 (before it was the default,
        or with it off) is searched without its list, said once per call in the log. Any other field a config
        enables is one the user asked for: searching a collection without it stays an error (StoreError)."""
        enabled = self.enabled_fields()
        if "e5" not in enabled or not self.store.exists() or self.store.has_field("e5"):
            return enabled
        _log.warning(
            "collection %r was built without e5 vectors: its search fuses the other lists only; ingest into "
            "a new collection (store.collection) to add them",
            self.collection,
        )
        return [name for name in enabled if name != "e5"]

    def hybrid_parts(self) -> list:
        """The retrievers hybrid mode fuses: bm25, dense, chunk (when weighted) and each vector field
        (fused_fields, e.g. retrieve.retrievers.e5), new objects over this stack's store and
        models."""
        chunk = [self.chunk_dense()] if self.config.retrieve.fusion.weights.get("chunk", 0.0) > 0 else []
        return [self.bm25(), self.dense(), *chunk] + [self.field_retriever(name) for name in self.fused_fields()]

    def hybrid_retriever(self, fusion: FusionConfig | None = None) -> HybridRetriever:
        """The hybrid retriever: in hybrid mode, with the config's fusion, the very one `retrieval` runs; otherwise
        (or with another `fusion`) one over this stack's own `hybrid_parts()`."""
        r = self.config.retrieve
        if r.mode == "hybrid" and (fusion is None or fusion == r.fusion):
            return self.retriever
        return HybridRetriever(self.hybrid_parts(), top_k=r.top_k, **(fusion or r.fusion).model_dump())

    def _build_retriever(self) -> HybridRetriever:
        r = self.config.retrieve
        if r.mode == "hybrid":
            parts = self.hybrid_parts()
        else:
            parts = [{"bm25": self.bm25, "dense": self.dense}.get(r.mode, lambda: self.field_retriever(r.mode))()]
        return HybridRetriever(parts, top_k=r.top_k, **r.fusion.model_dump())

    def _build_reranker(self):
        c = self.config.rerank
        if c.method == "cross_encoder":
            threads = self.config.embedding.threads  # the ONNX Runtime threads the embedder's setting gives
            return CrossEncoderReranker(
                c.model, top_k=c.top_k, batch_size=c.batch_size, threads=threads, fused_weight=c.fused_weight
            )
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

    def search(
        self,
        query: str,
        top_k: int | None = None,
        where: Where = None,
        rerank: bool = True,
        groups: Scope | None = None,
    ) -> SearchResult:
        """`retrieval.search` for one query within the caller's scope (`groups`: its access groups, or ALL; a
        missing scope is an AccessError); a missing collection is a clear error before any model loads."""
        scope_clauses(groups)
        self.store.table()
        return self.retrieval.search(query, where=where, top_k=top_k, rerank=rerank, run=RunContext(groups=groups))


def window_spec(config: SwitchyardConfig) -> tuple[int, int] | None:
    """(window_tokens, window_overlap) a new collection is built with, None when sentence windows are off."""
    i = config.ingest
    return (i.window_tokens, i.window_overlap) if i.window_tokens else None


def corpus_collection_for(config: SwitchyardConfig, paths: list, prefix: str = "eval") -> str:
    """The cached collection of a corpus under the config's index-shaping settings (retrievers/ingest.py
    corpus_collection): chunking, embedding model, windows, vector fields, the vector recording it is built from."""
    i, fields = config.ingest, config.retrieve.retrievers.fields()
    return corpus_collection(
        paths,
        i.chunk_size,
        i.chunk_overlap,
        config.embedding.model,
        prefix=prefix,
        windows=window_spec(config),
        fields=[field_key(name, f) for name, f in fields.items() if f.enabled],
        vectors=config.embedding.vector_cache,
    )


def field_key(name: str, field: VectorFieldConfig) -> str:
    """What a vector field adds to a cached collection's key: its name, and its model unless that is the field's
    default (so the e5 field's key is "e5", as it always was)."""
    default = type(field).model_fields["model"].default  # none for a field of `vector_fields`: its model is required
    return name if field.model == default else f"{name}:{field.model}"


def field_embedder_settings(embedding: dict, field: VectorFieldConfig) -> dict:
    """Embedder arguments for a vector field from those of the main model (`embedding`): its model on the same
    runtime (backend, threads, precision, cache, vector recording), with its batch size."""
    return {**embedding, "model": field.model, "batch_size": field.batch_size or embedding["batch_size"]}
