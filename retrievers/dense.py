"""Dense retrieval: embed the query with the collection's model, nearest chunks by cosine similarity in LanceDB."""

from __future__ import annotations

from switchyard.retrievers.documents import Passage
from switchyard.retrievers.embedder import TextEmbedder
from switchyard.retrievers.filters import Clause
from switchyard.retrievers.query_adapter import QueryAdapter
from switchyard.retrievers.store import IndexStore, VectorSearch


class DenseRetriever:
    """`name`, `field` and `query_prefix` make the same retriever serve a vector field (retrieve.retrievers): its
    name, its column in the store, and its model's query prefix."""

    def __init__(
        self,
        store: IndexStore,
        embedder: TextEmbedder,
        top_k: int = 100,
        adapter: QueryAdapter | None = None,
        name: str = "dense",
        field: str | None = None,
        query_prefix: str = "",
    ):
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.store = store
        self.embedder = embedder
        self.top_k = top_k
        self.adapter = adapter
        self.name = name
        self.field = field
        self.query_prefix = query_prefix

    def run(self, query: str, top_k: int | None = None, where: list[Clause] | None = None) -> list[Passage]:
        if not query.strip():
            return []
        vector = self.embedder.embed_query(self.query_prefix + query)
        if self.adapter is not None:
            vector = self.adapter.run(vector)
        return VectorSearch(self.store, self.field).run(vector, top_k or self.top_k, where)
