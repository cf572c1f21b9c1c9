"""The on-disk index: one LanceDB table per collection holding chunks, their vectors and a native BM25 FTS index.

Writes are crash-safe per document: all chunks of a batch of documents are written by ONE `merge_insert` commit
that also deletes those documents' stale chunks, so a killed process leaves each document as it was or fully
replaced (LanceDB commits a new table version atomically; a half-written commit is never visible).

Reading, counting, listing and deleting take the caller's access scope (`scope`: its groups, or `ALL`); a missing
scope is an `AccessError`, never read as "everything". Searches and fetches by id are the components of queries.py
(`FullTextSearch`, `VectorSearch`, `ChunkFetch`), built on this store.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import TypeVar

import numpy as np
import pyarrow as pa

from switchyard.configs.schema import VectorIndexConfig
from switchyard.errors import CollectionNotFound
from switchyard.retrievers.documents import Chunk, Passage, search_text
from switchyard.retrievers.filters import ACL_FIELD, Clause, scope_clauses, to_sql
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.store import vector_index as ann
from switchyard.retrievers.store.connection import connect, redact_storage_options
from switchyard.retrievers.store.schema import (
    ACL,
    ROW_COLUMNS,
    VECTOR_COLUMN,
    WINDOW_COLUMN,
    check_compatible,
    collection_schema,
    field_column,
    recorded_meta,
    sql_list,
    table_vector_fields,
    table_windows,
)
from switchyard.run_context import ALL, Scope

T = TypeVar("T")
COMMIT_ATTEMPTS = 5  # writes and index upkeep retried on a commit conflict with another process (a server sharing it)


def retrying_conflicts(commit: Callable[[], T]) -> T:
    """`commit()`, again after a jittered pause while LanceDB refuses it with a retryable commit conflict (another
    process sharing the collection committed first), up to COMMIT_ATTEMPTS times in all."""
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            return commit()
        except Exception as exc:  # LanceDB raises RuntimeError("lance error: Retryable commit conflict ...")
            if "retryable commit conflict" not in str(exc).lower() or attempt == COMMIT_ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0.05, 0.25) * (attempt + 1))
    raise AssertionError("unreachable")


class IndexStore:
    """A LanceDB-backed collection. `uri` is any LanceDB URI (local folder, s3://…, gs://…), passed through as is,
    with `storage_options` (endpoint, region, credentials, ...) for object stores. Values `env:NAME` are read from
    the environment when the store connects (first use), so those secrets are never held here.

    The schema metadata records the embedding model, its dimension and the embedding backend (torch, onnx,
    openvino) that created the collection. Another model or dimension is refused; another backend of the same model
    is allowed: the backends run the same weights and agree to cosine > 0.999 with the same top results (tested in
    tests/retrievers/test_embedder_backends.py), so the recorded backend is provenance, not a constraint.

    `windows` (window_tokens, window_overlap) makes a new collection hold sentence-window vectors beside each chunk's
    vector, and dense search use them; `vector_fields` (name -> dimension) makes it hold one vector per chunk from
    each further model (retrieve.retrievers: the configured vector fields). An existing collection keeps what it
    was built with: `windows` and `vector_fields` follow its schema, so a collection made before windows existed (or
    with them off) is still searched and extended, by its chunk vectors.

    `vector_index` (configs/schema.py `VectorIndexConfig`, validated there) is the ANN index each vector column gets
    once it holds `vector_index_min_rows` vectors (0: never)."""

    def __init__(
        self,
        uri: str,
        collection: str,
        embedding_model: str = "minilm",
        dim: int = 384,
        fts_stem: bool = True,
        fts_remove_stop_words: bool = True,
        vector_index: VectorIndexConfig | None = None,
        storage_options: dict[str, str] | None = None,
        embedding_backend: str = "torch",
        windows: tuple[int, int] | None = None,
        vector_fields: dict[str, int] | None = None,
        vector_index_min_rows: int = 50_000,
        reindex_min_rows: int = 256,
    ):
        if dim < 1:
            raise ValueError("dim must be >= 1")
        if any(d < 1 for d in (vector_fields or {}).values()):
            raise ValueError("vector field dimensions must be >= 1")
        if windows is not None and not (windows[0] >= 1 and 0 <= windows[1] < windows[0]):
            raise ValueError("windows must be (window_tokens >= 1, 0 <= window_overlap < window_tokens)")
        self.uri = uri
        self.collection = collection
        self.storage_options = dict(storage_options or {})
        self.embedding_model = embedding_model
        self.embedding_backend = embedding_backend
        self.dim = dim
        self.fts_stem = fts_stem
        self.fts_remove_stop_words = fts_remove_stop_words
        self.vector_index = vector_index or VectorIndexConfig()
        self.vector_index_min_rows = vector_index_min_rows
        self.reindex_min_rows = reindex_min_rows
        self._windows = (windows[0], windows[1]) if windows else None
        self._vector_fields = dict(vector_fields or {})
        self._db = Lazy(lambda: connect(self.uri, self.storage_options))
        self._table = None
        self._table_shape: tuple[tuple[int, int] | None, dict[str, int]] | None = None
        self._table_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"IndexStore(uri={self.uri!r}, collection={self.collection!r}, "
            f"storage_options={redact_storage_options(self.storage_options)!r})"
        )

    # -- tables and schema ----------------------------------------------------------------------------------
    @property
    def db(self):
        return self._db.get()

    def collections(self) -> list[str]:
        result = self.db.list_tables()
        names = getattr(result, "tables", result)
        return sorted(names)

    def exists(self) -> bool:
        return self.collection in self.collections()

    def schema(self) -> pa.Schema:
        """The schema a new collection is created with."""
        return collection_schema(
            self.embedding_model, self.embedding_backend, self.dim, self._windows, self._vector_fields
        )

    def _shape(self) -> tuple[tuple[int, int] | None, dict[str, int]]:
        """(windows, vector fields) of the collection, or, for one not created yet, those it will be created with."""
        if self._table is None and not self.exists():
            return self._windows, dict(self._vector_fields)
        if self._table_shape is None:  # read once: a collection's schema does not change once created
            table = self.table()
            self._table_shape = (table_windows(table), table_vector_fields(table))
        return self._table_shape

    @property
    def windows(self) -> tuple[int, int] | None:
        """(window_tokens, window_overlap) of the collection's window vectors, None if it has none; for a collection
        not created yet, the ones it will be created with."""
        return self._shape()[0]

    @property
    def has_windows(self) -> bool:
        return self.windows is not None

    @property
    def vector_fields(self) -> dict[str, int]:
        """The named vector fields the collection holds (name -> dimension); for one not created yet, the ones it
        will be created with."""
        return self._shape()[1]

    def has_field(self, name: str) -> bool:
        return name in self.vector_fields

    @property
    def vector_column(self) -> str:
        """The column dense search scans: the window vectors, or the chunk vectors."""
        return WINDOW_COLUMN if self.has_windows else VECTOR_COLUMN

    def table(self, create: bool = False):
        """The open LanceDB table (opened once; one handle serves every thread)."""
        if self._table is None:
            with self._table_lock:
                if self._table is None:
                    self._table = self._open(create)
        return self._table

    def _open(self, create: bool):
        if not self.exists():
            if not create:
                raise CollectionNotFound(
                    f"collection {self.collection!r} does not exist in {self.uri} "
                    f"(collections: {', '.join(self.collections()) or 'none'}); ingest first"
                )
            return self.db.create_table(self.collection, schema=self.schema(), exist_ok=True)
        table = self.db.open_table(self.collection)
        check_compatible(table, self.collection, self.embedding_model, self.dim)
        return table

    def metadata(self) -> dict:
        """The collection's recorded embedding model, dim and backend ({} for a collection made before they were
        recorded; one made before the backend was recorded was built with torch, the only backend then)."""
        meta = recorded_meta(self.table())
        if meta:
            meta.setdefault("embedding_backend", "torch")
        return meta

    def version(self) -> int:
        return self.table().version

    # -- access labels --------------------------------------------------------------------------------------
    def has_acl(self) -> bool:
        """Whether the collection has the access-label column (read each time: another process may add it)."""
        return ACL_FIELD in self.table().schema.names

    def row_columns(self) -> list[str]:
        return ROW_COLUMNS + [ACL_FIELD] if self.has_acl() else ROW_COLUMNS

    def with_access(self, access: list[Clause], read: Callable):
        """`read(sql)` with `sql` the access clauses as SQL (None: no restriction). Without the acl column every
        chunk is unlabelled and the clauses are left out; if the column appears during that read (a labelled
        document written meanwhile), the read is done again with them, so no labelled chunk slips through."""
        if not access:
            return read(None)
        labelled = self.has_acl()
        out = read(to_sql(access) if labelled else None)
        if not labelled and self.has_acl():
            out = read(to_sql(access))
        return out

    # -- reads (each within the caller's scope) -------------------------------------------------------------
    def count(self, scope: Scope | None = None) -> int:
        """Chunks in the collection readable within `scope` (its groups, or ALL)."""
        access = scope_clauses(scope)
        if not self.exists():
            return 0
        return self.with_access(access, lambda sql: self.table().count_rows(sql) if sql else self.table().count_rows())

    def scan(self, columns: list[str], where: str | None = None, scope: Scope | None = None) -> pa.Table:
        """Rows of the collection (`where`: SQL) readable within `scope`."""
        return self.with_access(
            scope_clauses(scope),
            lambda sql: self._scan(columns, " AND ".join(f"({w})" for w in (where, sql) if w) or None),
        )

    def _scan(self, columns: list[str], where: str | None) -> pa.Table:
        tbl = self.table()
        n = tbl.count_rows()
        if n == 0:
            return pa.table({c: pa.array([], type=tbl.schema.field(c).type) for c in columns})
        query = tbl.search().select(columns).limit(n)
        if where:
            query = query.where(where)
        return query.to_arrow()

    def doc_states(self) -> dict[str, dict]:
        """doc_id -> {doc_hash, source, chunks} for every indexed document (the ingestor's view: scope ALL)."""
        rows = self.scan(["doc_id", "doc_hash", "source"], scope=ALL).to_pylist()
        states: dict[str, dict] = {}
        for row in rows:
            state = states.setdefault(
                row["doc_id"], {"doc_hash": row["doc_hash"], "source": row["source"], "chunks": 0, "hashes": set()}
            )
            state["chunks"] += 1
            state["hashes"].add(row["doc_hash"])
        return states

    def list_documents(self, scope: Scope | None = None) -> list[dict]:
        """The documents readable within `scope`, each with its chunks and last page."""
        rows = self.scan(["doc_id", "source", "title", "page"], scope=scope).to_pylist()
        docs: dict[str, dict] = {}
        for row in rows:
            doc = docs.setdefault(
                row["doc_id"],
                {"doc_id": row["doc_id"], "title": row["title"], "source": row["source"], "chunks": 0, "pages": set()},
            )
            doc["chunks"] += 1
            if row["page"] is not None:
                doc["pages"].add(row["page"])
        out = []
        for doc in sorted(docs.values(), key=lambda d: (d["source"], d["doc_id"])):
            doc["pages"] = max(doc["pages"]) if doc["pages"] else None
            out.append(doc)
        return out

    def document_chunks(self, doc_id: str, scope: Scope | None = None) -> list[Passage]:
        """The chunks of one document, in order ([] for a document the collection does not hold or that `scope`
        may not read)."""
        rows = self.scan(ROW_COLUMNS, where=f"doc_id = {sql_list([doc_id])}", scope=scope).to_pylist()
        return [Passage.from_row(row) for row in sorted(rows, key=lambda row: row["chunk_index"])]

    # -- writes and deletes ---------------------------------------------------------------------------------
    def write_documents(
        self,
        doc_ids: list[str],
        chunks: list[Chunk],
        vectors: np.ndarray,
        window_vectors: list[np.ndarray] | None = None,
        field_vectors: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Replace the chunks of `doc_ids` with `chunks` in one atomic commit (inserts, updates and deletes).
        A collection with window vectors needs `window_vectors`: one (windows x dim) array per chunk; one with
        vector fields needs `field_vectors[name]` for each, one vector per chunk."""
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk")
        if not doc_ids:
            return
        tbl = self.table(create=True)
        rows = [asdict(c) for c in chunks]
        if ACL_FIELD not in tbl.schema.names and any(r["acl"] for r in rows):
            # a collection made before labels existed gets the column (existing rows: null, unlabelled) in its own
            # commit before the first labelled document
            tbl.add_columns(ACL)
        columns = {name: [r[name] for r in rows] for name in ROW_COLUMNS}
        if ACL_FIELD in tbl.schema.names:
            columns[ACL_FIELD] = [r["acl"] for r in rows]
        columns["search_text"] = [search_text(c.title, c.text) for c in chunks]
        columns[VECTOR_COLUMN] = _fixed_size(vectors, len(chunks), self.dim)
        if WINDOW_COLUMN in tbl.schema.names:
            if window_vectors is None or len(window_vectors) != len(chunks) or any(len(w) == 0 for w in window_vectors):
                raise ValueError(f"collection {self.collection!r} holds window vectors: give at least one per chunk")
            flat = (
                np.concatenate([np.asarray(w, dtype=np.float32).reshape(-1, self.dim) for w in window_vectors])
                if window_vectors
                else np.zeros((0, self.dim), dtype=np.float32)
            )
            offsets = np.cumsum([0] + [len(w) for w in window_vectors]).astype(np.int32)
            columns[WINDOW_COLUMN] = pa.ListArray.from_arrays(
                pa.array(offsets), pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), self.dim)
            )
        for name, field_dim in table_vector_fields(tbl).items():
            given = (field_vectors or {}).get(name)
            if given is None or len(given) != len(chunks):
                raise ValueError(f"collection {self.collection!r} holds {name} vectors: give one per chunk")
            columns[field_column(name)] = _fixed_size(given, len(chunks), field_dim)
        data = pa.table(columns, schema=pa.schema([f for f in tbl.schema]))
        retrying_conflicts(  # an upsert of whole documents: the same again is the same result
            lambda: (
                tbl.merge_insert("chunk_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(f"doc_id IN ({sql_list(doc_ids)})")
                .execute(data)
            )
        )

    def delete_documents(self, doc_ids: Iterable[str], scope: Scope | None = None) -> int:
        """Delete the documents' chunks readable within `scope`; the number deleted."""
        access = scope_clauses(scope)
        doc_ids = list(doc_ids)
        if not doc_ids or not self.exists():
            return 0
        tbl = self.table()
        before = tbl.count_rows()
        where = f"doc_id IN ({sql_list(doc_ids)})"
        self.with_access(
            access, lambda sql: retrying_conflicts(lambda: tbl.delete(where + (f" AND {sql}" if sql else "")))
        )
        return before - tbl.count_rows()

    # -- index upkeep ---------------------------------------------------------------------------------------
    def refresh_indexes(self) -> None:
        """Bring the search indexes up to date; cheap when nothing changed, so every ingest ends with it.

        - once `reindex_min_rows` rows have been written since the indexes were last updated, or more than 8 small
          fragments have piled up, the fragments are compacted and those rows folded into the indexes (first, so a
          new index is built over compacted files and needs no remapping). Below that they are searched
          exhaustively: folding after every small write (one uploaded file) costs more than it saves, and each
          fold leaves memory behind in a long-running server (docs/benchmarks.md, the service under load);
        - the native BM25 full-text index over `search_text` is created once, then updated incrementally;
        - the ANN vector index (`vector_index`) is added once the table reaches `vector_index_min_rows` (below
          that, exact search is fast enough and loses nothing); with vector fields, one for each of them too.
        Rows written after an index was built are still searched (exhaustively) until the next refresh, so a
        crash between a write and this call costs speed, never results.
        """
        retrying_conflicts(self._refresh_indexes)  # the index another process built may be the one wanted here

    def _refresh_indexes(self) -> None:
        tbl = self.table()
        if tbl.count_rows() == 0:
            return
        unindexed = max((ix.num_unindexed_rows or 0 for ix in tbl.list_indices()), default=0)
        stale = unindexed > 0 and unindexed >= self.reindex_min_rows
        if stale or tbl.stats()["fragment_stats"]["num_small_fragments"] > 8:
            self.optimize()
        self.ensure_text_index()
        self.ensure_vector_index()

    def _index_types(self) -> set[str]:
        return {ix.index_type.upper() for ix in self.table().list_indices()}

    def ensure_text_index(self) -> bool:
        """Create the BM25 full-text index if it is missing; True if it was created."""
        if self.has_text_index():
            return False
        from lancedb.index import FTS

        self.table().create_index(
            "search_text",
            config=FTS(
                with_position=False,
                stem=self.fts_stem,
                remove_stop_words=self.fts_remove_stop_words,
                lower_case=True,
                ascii_folding=True,
            ),
            replace=True,
        )
        return True

    def has_text_index(self) -> bool:
        return "FTS" in self._index_types()

    def has_vector_index(self, column: str | None = None) -> bool:
        """Whether `column` (default: the one dense search scans) has an ANN index."""
        column = column or self.vector_column
        return any(
            ix.index_type.upper().startswith("IVF") and column in ix.columns for ix in self.table().list_indices()
        )

    def searched_vectors(self, sample: int = 1000) -> int:
        """How many vectors a dense search scans: one per chunk, or (with windows) about the chunks times the mean
        windows per chunk of the first `sample` rows, so that no full scan of the window vectors is needed."""
        n = self.table().count_rows()
        if not self.has_windows or n == 0:
            return n
        import pyarrow.compute as pc

        head = self.table().search().select([WINDOW_COLUMN]).limit(min(n, sample)).to_arrow()[WINDOW_COLUMN]
        return round(n * pc.mean(pc.list_value_length(head)).as_py())

    def ensure_vector_index(self) -> bool:
        """Create the ANN vector index if the searched vectors (chunks, or their windows) have reached
        `vector_index_min_rows` and there is none yet; likewise for each vector field (one vector per chunk)."""
        built = False
        if not self.vector_index_min_rows:
            return built
        if not self.has_vector_index() and self.searched_vectors() >= self.vector_index_min_rows:
            self.build_vector_index()
            built = True
        for name in self.vector_fields:
            column = field_column(name)
            if not self.has_vector_index(column) and self.table().count_rows() >= self.vector_index_min_rows:
                self.build_vector_index(column)
                built = True
        return built

    def build_vector_index(self, column: str | None = None) -> None:
        """(Re)build the ANN vector index of `column` (default: the one dense search scans) as `vector_index`
        describes, replacing any other on that column."""
        tbl = self.table()
        column = column or self.vector_column
        dims = {field_column(name): dim for name, dim in self.vector_fields.items()}
        tbl.create_index(
            column,
            config=ann.index_config(self.vector_index, tbl.count_rows(), dims.get(column, self.dim)),
            replace=True,
        )

    def optimize(self) -> None:
        """Compact small files, fold new rows into the indexes, prune versions older than an hour."""
        from datetime import timedelta

        self.table().optimize(cleanup_older_than=timedelta(hours=1))


def _fixed_size(vectors, rows: int, dim: int) -> pa.FixedSizeListArray:
    flat = np.asarray(vectors, dtype=np.float32).reshape(rows, dim)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), dim)
