"""Dense retrieval: embed the query with the collection's model, nearest chunks by cosine similarity in LanceDB."""
from __future__ import annotations

from retrievers.documents import Passage
from retrievers.embedder import Embedder
from retrievers.filters import Clause
from retrievers.query_adapter import QueryAdapter
from retrievers.store import IndexStore


class DenseRetriever:
    name = "dense"

    def __init__(self, store: IndexStore, embedder: Embedder, top_k: int = 100,
                 adapter: QueryAdapter | None = None):
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.store = store
        self.embedder = embedder
        self.top_k = top_k
        self.adapter = adapter

    def run(self, query: str, top_k: int | None = None, where: list[Clause] | None = None) -> list[Passage]:
        if not query.strip():
            return []
        vector = self.embedder.embed_query(query)
        if self.adapter is not None:
            vector = self.adapter.run(vector)
        return self.store.vector_search(vector, top_k or self.top_k, where)
