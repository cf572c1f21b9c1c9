"""Retrieval components over an `IndexStore`, one per query type: full-text (BM25), vector (a vector column:
the chunk vectors, their sentence windows, or a named vector field) and fetches of stored chunks and vectors by id.
Each runs one LanceDB query with the caller's filter inside it (prefilter: the top k are all admitted), access
clauses first; the store itself only holds tables, schema, writes, deletes and index upkeep."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from switchyard.errors import StoreError
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.filters import READABLE, Clause, to_sql
from switchyard.retrievers.store import vector_index
from switchyard.retrievers.store.schema import ROW_COLUMNS, VECTOR_COLUMN, WINDOW_COLUMN, field_column, sql_list
from switchyard.run_context import ALL

if TYPE_CHECKING:
    from switchyard.retrievers.store.index_store import IndexStore


def _passages(store: IndexStore, query, where: list[Clause] | None, score: Callable[[dict], float]) -> list[Passage]:
    """Run `query` with the filter inside it (prefilter: the top k are all admitted), access clauses first."""
    access = [c for c in where or [] if c.op == READABLE]
    narrowing = to_sql([c for c in where or [] if c.op != READABLE])

    def read(access_sql: str | None):
        sql = " AND ".join(w for w in (access_sql, narrowing) if w)
        return (query.where(sql, prefilter=True) if sql else query).to_arrow().to_pylist()

    out = []
    for row in store.with_access(access, read):
        p = Passage.from_row(row)
        p.score = score(row)
        out.append(p)
    return out


class FullTextSearch:
    """BM25 over `search_text`, LanceDB's native full-text index."""

    def __init__(self, store: IndexStore):
        self.store = store

    def run(self, text: str, k: int, where: list[Clause] | None = None) -> list[Passage]:
        if not text.strip():
            return []
        query = (
            self.store.table()
            .search(text, query_type="fts", fts_columns="search_text")
            .select(ROW_COLUMNS + ["_score"])
            .limit(k)
        )
        return _passages(self.store, query, where, lambda row: float(row["_score"]))


CHUNK_VECTORS = "chunk"  # VectorSearch's field for each chunk's own vector, windows or not


class VectorSearch:
    """The k chunks nearest a vector, scored by cosine similarity: of the chunk's vector, or, in a collection with
    window vectors, of its best window; `field` names a vector field to search instead (its column), or
    CHUNK_VECTORS: each chunk's own vector even where windows exist."""

    def __init__(self, store: IndexStore, field: str | None = None):
        self.store = store
        self.field = field

    def column(self) -> str:
        if self.field is None:
            return self.store.vector_column
        if self.field == CHUNK_VECTORS:
            return VECTOR_COLUMN
        if self.field not in self.store.vector_fields:
            raise StoreError(
                f"collection {self.store.collection!r} holds no {self.field} vectors (it was built "
                "without that vector field): ingest into a new collection with it enabled"
            )
        return field_column(self.field)

    def run(self, vector: np.ndarray, k: int, where: list[Clause] | None = None) -> list[Passage]:
        column = self.column()
        query = (
            self.store.table()
            .search(np.asarray(vector, dtype=np.float32), vector_column_name=column)
            .distance_type("cosine")
            .select(ROW_COLUMNS + ["_distance"])
            .limit(k)
        )
        # over the multivector column LanceDB's cosine distance is 1 - the best window's cosine (MaxSim)
        min_ef = vector_index.MULTIVECTOR_HITS_PER_K * k if column == WINDOW_COLUMN else 0
        return _passages(
            self.store,
            vector_index.tune(self.store.vector_index, query, min_ef),
            where,
            lambda row: 1.0 - float(row["_distance"]),
        )


class ChunkFetch:
    """Stored chunks and vectors by id (for checks and rescoring that need not embed passages again). These are
    the store's own reads of chunks a search already admitted, so they read with scope ALL."""

    def __init__(self, store: IndexStore):
        self.store = store

    def passages(self, chunk_ids: list[str]) -> dict[str, Passage]:
        if not chunk_ids:
            return {}
        rows = self.store.scan(ROW_COLUMNS, where=f"chunk_id IN ({sql_list(chunk_ids)})", scope=ALL).to_pylist()
        return {row["chunk_id"]: Passage.from_row(row) for row in rows}

    def vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored (title + text) vectors of some chunks."""
        if not chunk_ids:
            return {}
        rows = self.store.scan(["chunk_id", "vector"], where=f"chunk_id IN ({sql_list(chunk_ids)})", scope=ALL)
        vecs = rows["vector"].to_numpy(zero_copy_only=False)
        return {cid: np.asarray(v, dtype=np.float32) for cid, v in zip(rows["chunk_id"].to_pylist(), vecs)}

    def dense_vectors(
        self, chunk_ids: list[str] | None = None, doc_ids: list[str] | None = None
    ) -> dict[str, tuple[str, np.ndarray]]:
        """chunk_id -> (doc_id, the vectors dense search scores the chunk by: its windows, or its one vector as a
        1 x dim array), for the given chunks or the chunks of the given documents."""
        column, ids = self.store.vector_column, chunk_ids if chunk_ids is not None else doc_ids
        key = "chunk_id" if chunk_ids is not None else "doc_id"
        if not ids:
            return {}
        wanted = set(ids)
        # a long IN (...) list is slower for LanceDB than one scan filtered here
        where = f"{key} IN ({sql_list(wanted)})" if len(wanted) <= 1000 else None
        out = {}
        for row in self.store.scan(["chunk_id", "doc_id", column], where=where, scope=ALL).to_pylist():
            if row[key] in wanted:
                vectors = np.asarray(row[column], dtype=np.float32).reshape(-1, self.store.dim)
                out[row["chunk_id"]] = (row["doc_id"], vectors)
        return out
