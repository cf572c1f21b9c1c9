"""The on-disk index: one LanceDB table per collection holding chunks, their vectors and a native BM25 FTS index.

Writes are crash-safe per document: all chunks of a batch of documents are written by ONE `merge_insert` commit
that also deletes those documents' stale chunks, so a killed process leaves each document as it was or fully
replaced (LanceDB commits a new table version atomically; a half-written commit is never visible).
"""
from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import asdict, dataclass
from typing import Iterable

import numpy as np
import pyarrow as pa

from switchyard.configs.schema import VectorIndexKind
from switchyard.retrievers.documents import Chunk, Passage, search_text
from switchyard.retrievers.filters import ACL_FIELD, READABLE, Clause, readable_by, to_sql
from switchyard.retrievers.lazy import Lazy
from switchyard.errors import CollectionNotFound, StoreError

META_KEY = b"switchyard"
_CHUNK_FIELDS = [
    pa.field("chunk_id", pa.string(), nullable=False),
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("source", pa.string()),
    pa.field("title", pa.string()),
    pa.field("text", pa.string()),
    pa.field("chunk_index", pa.int32()),
    pa.field("start_char", pa.int64()),
    pa.field("end_char", pa.int64()),
    pa.field("page", pa.int32()),
    pa.field("page_end", pa.int32()),
    pa.field("content_hash", pa.string()),
    pa.field("doc_hash", pa.string()),
]
ROW_COLUMNS = [f.name for f in _CHUNK_FIELDS]
# A document's access labels (retrievers/filters.py); collections made before labels existed lack the column until a
# labelled document is written to them, and read as unlabelled until then.
ACL = pa.field(ACL_FIELD, pa.string())
# What BM25 and the embedder see: the title, then the chunk text (titles carry much of a short document's topic).
SEARCH_FIELD = pa.field("search_text", pa.string())
# A collection built with sentence windows (ingest.window_tokens) holds each chunk's window vectors here, a LanceDB
# multivector column: a vector search over it scores a row by its best window (MaxSim with one query vector).
WINDOW_COLUMN = "window_vectors"
# A collection built with the second dense model (retrieve.retrievers.e5) holds each chunk's e5 vector here.
E5_COLUMN = "e5_vector"
# LanceDB's multivector search asks the HNSW graph for this many window hits per chunk asked for, and refuses an `ef`
# below that (measured: k 7 / 50 / 100 need ef >= 70 / 500 / 1000)
MULTIVECTOR_HITS_PER_K = 10


def _sql_list(values: Iterable[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)




@dataclass(frozen=True)
class VectorIndexSpec:
    """The ANN vector index a collection gets from `min_rows` chunks on, and how searches use it; 0 = automatic.

    Measured by bench/scale.py (recall@10 against exact search, p50 latency, build time at 100k and 1M chunks).
    """

    kind: VectorIndexKind = "ivf_hnsw_sq"
    min_rows: int = 50_000
    num_partitions: int = 0  # 0: one per 50k rows (ivf_hnsw_sq), sqrt(rows) (ivf_pq)
    num_sub_vectors: int = 0  # ivf_pq; 0: dim / 8 (8 dimensions per 1-byte code)
    nprobes: int = 0  # IVF partitions searched; 0: lance's default (20)
    refine_factor: int = 0  # ivf_pq: re-rank refine_factor * k candidates by their exact vectors; 0 = off
    ef: int = 0  # ivf_hnsw_sq: candidates per HNSW search; 0 = lance's default (1.5 * k)

    def __post_init__(self):
        numbers = {f: getattr(self, f) for f in ("min_rows", "num_partitions", "num_sub_vectors", "nprobes",
                                                 "refine_factor", "ef")}
        negative = [f for f, v in numbers.items() if v < 0]
        if negative:
            raise ValueError(f"vector index settings must be >= 0: {', '.join(negative)}")

    def partitions(self, rows: int) -> int:
        if self.num_partitions:
            return self.num_partitions
        if self.kind == "ivf_hnsw_sq":
            return max(1, rows // 50_000)
        return max(1, round(math.sqrt(rows)))

    def index_config(self, rows: int, dim: int):
        from lancedb.index import IvfHnswSq, IvfPq

        if self.kind == "ivf_hnsw_sq":
            return IvfHnswSq(distance_type="cosine", num_partitions=self.partitions(rows))
        sub_vectors = self.num_sub_vectors or max(1, dim // 8)
        if dim % sub_vectors:
            raise ValueError(f"num_sub_vectors {sub_vectors} must divide the vector dimension {dim}")
        return IvfPq(distance_type="cosine", num_partitions=self.partitions(rows), num_sub_vectors=sub_vectors)

    def tune(self, query, min_ef: int = 0):
        """Apply the search settings to a LanceDB vector query (without an index they change nothing); a set `ef`
        is raised to `min_ef` where the search needs that many candidates."""
        if self.nprobes:
            query = query.nprobes(self.nprobes)
        if self.refine_factor:
            query = query.refine_factor(self.refine_factor)
        if self.ef:
            query = query.ef(max(self.ef, min_ef))
        return query


ENV_PREFIX = "env:"
_SECRET_WORDS = ("secret", "token", "password", "key", "sas", "credential")


def resolve_storage_options(options: dict[str, str]) -> dict[str, str]:
    """`storage_options` with every `env:NAME` value replaced by the environment variable NAME."""
    resolved = {}
    for key, value in options.items():
        if value.startswith(ENV_PREFIX):
            name = value[len(ENV_PREFIX):]
            if name not in os.environ:
                raise StoreError(f"store.storage_options.{key} names ${name}, which is not set")
            value = os.environ[name]
        resolved[key] = value
    return resolved


def redact_storage_options(options: dict[str, str]) -> dict[str, str]:
    """For display: `env:NAME` references as they are, literal values of secret-looking keys as '***'."""
    return {k: v if v.startswith(ENV_PREFIX) or not any(w in k.lower() for w in _SECRET_WORDS) else "***"
            for k, v in options.items()}


def _e5_dim(table) -> int:
    """The dimension of a collection's e5 vectors, as its schema records it."""
    return table.schema.field(E5_COLUMN).type.list_size


def _recorded_meta(table) -> dict:
    """What a collection's schema metadata records (embedding model, dim, backend); {} if nothing."""
    raw = (table.schema.metadata or {}).get(META_KEY)
    return json.loads(raw) if raw else {}


class IndexStore:
    """A LanceDB-backed collection. `uri` is any LanceDB URI (local folder, s3://…, gs://…), passed through as is,
    with `storage_options` (endpoint, region, credentials, ...) for object stores. Values `env:NAME` are read from
    the environment when the store connects (first use), so those secrets are never held here.

    The schema metadata records the embedding model, its dimension and the embedding backend (torch, onnx,
    openvino) that created the collection. Another model or dimension is refused; another backend of the same model
    is allowed: the backends run the same weights and agree to cosine > 0.999 with the same top results (tested in
    tests/retrievers/test_embedder_backends.py), so the recorded backend is provenance, not a constraint.

    `windows` (window_tokens, window_overlap) makes a new collection hold sentence-window vectors beside each chunk's
    vector, and dense search use them. An existing collection keeps what it was built with: `has_windows` and
    `windows` follow its schema and metadata, so a collection made before windows existed (or with them off) is
    still searched and extended, by its chunk vectors.

    `e5_dim` likewise makes a new collection hold one vector per chunk from the second dense model (`E5_COLUMN`,
    retrieve.retrievers.e5); `has_e5` follows the collection's schema once it exists."""

    def __init__(self, uri: str, collection: str, embedding_model: str = "minilm", dim: int = 384,
                 fts_stem: bool = True, fts_remove_stop_words: bool = True,
                 vector_index: VectorIndexSpec | None = None, storage_options: dict[str, str] | None = None,
                 embedding_backend: str = "torch", windows: tuple[int, int] | None = None,
                 e5_dim: int | None = None):
        if dim < 1:
            raise ValueError("dim must be >= 1")
        if e5_dim is not None and e5_dim < 1:
            raise ValueError("e5_dim must be >= 1")
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
        self.vector_index = vector_index or VectorIndexSpec()
        self._windows = tuple(windows) if windows else None
        self._e5_dim = e5_dim
        self._table_e5: bool | None = None
        self._db = Lazy(self._connect)
        self._table = None
        self._table_windows: tuple[int, int] | None | str = "unknown"
        self._table_lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"IndexStore(uri={self.uri!r}, collection={self.collection!r}, "
                f"storage_options={redact_storage_options(self.storage_options)!r})")

    # -- connection -----------------------------------------------------------------------------------------
    def _connect(self):
        from datetime import timedelta

        import lancedb

        options = resolve_storage_options(self.storage_options) or None
        try:
            # see writes made by other processes (a CLI ingest while a server answers queries)
            return lancedb.connect(self.uri, read_consistency_interval=timedelta(0), storage_options=options)
        except (OSError, ValueError, RuntimeError) as exc:  # e.g. a missing bucket or an unreachable endpoint
            raise StoreError(f"cannot open the index at {self.uri}: {exc}") from exc

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
        meta = {"embedding_model": self.embedding_model, "embedding_backend": self.embedding_backend, "dim": self.dim}
        fields = _CHUNK_FIELDS + [ACL, SEARCH_FIELD, pa.field("vector", pa.list_(pa.float32(), self.dim))]
        if self._windows:
            meta["windows"] = list(self._windows)
            fields.append(pa.field(WINDOW_COLUMN, pa.list_(pa.list_(pa.float32(), self.dim))))
        if self._e5_dim:
            meta["e5_dim"] = self._e5_dim
            fields.append(pa.field(E5_COLUMN, pa.list_(pa.float32(), self._e5_dim)))
        return pa.schema(fields, metadata={META_KEY: json.dumps(meta).encode()})

    @property
    def windows(self) -> tuple[int, int] | None:
        """(window_tokens, window_overlap) of the collection's window vectors, None if it has none; for a collection
        not created yet, the ones it will be created with."""
        if self._table is None and not self.exists():
            return self._windows
        if self._table_windows == "unknown":  # read once: a collection's schema does not change once created
            table = self.table()
            recorded = _recorded_meta(table).get("windows")
            self._table_windows = tuple(recorded) if recorded and WINDOW_COLUMN in table.schema.names else None
        return self._table_windows

    @property
    def has_windows(self) -> bool:
        return self.windows is not None

    @property
    def has_e5(self) -> bool:
        """Whether the collection holds e5 vectors; for a collection not created yet, whether it will."""
        if self._table is None and not self.exists():
            return bool(self._e5_dim)
        if self._table_e5 is None:  # read once, like the windows
            self._table_e5 = E5_COLUMN in self.table().schema.names
        return self._table_e5

    @property
    def vector_column(self) -> str:
        """The column dense search scans: the window vectors, or the chunk vectors."""
        return WINDOW_COLUMN if self.has_windows else "vector"

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
                raise CollectionNotFound(f"collection {self.collection!r} does not exist in {self.uri} "
                                 f"(collections: {', '.join(self.collections()) or 'none'}); ingest first")
            return self.db.create_table(self.collection, schema=self.schema(), exist_ok=True)
        table = self.db.open_table(self.collection)
        self._check_compatible(table)
        return table

    def metadata(self) -> dict:
        """The collection's recorded embedding model, dim and backend ({} for a collection made before they were
        recorded; one made before the backend was recorded was built with torch, the only backend then)."""
        meta = _recorded_meta(self.table())
        if meta:
            meta.setdefault("embedding_backend", "torch")
        return meta

    def _check_compatible(self, table) -> None:
        # the embedding backend is not checked: same model, same vectors (see the class docstring)
        meta = _recorded_meta(table)
        if meta and (meta.get("embedding_model") != self.embedding_model or meta.get("dim") != self.dim):
            raise StoreError(
                f"collection {self.collection!r} was built with embedding model {meta.get('embedding_model')!r} "
                f"(dim {meta.get('dim')}), but the config uses {self.embedding_model!r} (dim {self.dim}); "
                "use another collection or re-ingest"
            )

    # -- access labels --------------------------------------------------------------------------------------
    def has_acl(self) -> bool:
        """Whether the collection has the access-label column (read each time: another process may add it)."""
        return ACL_FIELD in self.table().schema.names

    def row_columns(self) -> list[str]:
        return ROW_COLUMNS + [ACL_FIELD] if self.has_acl() else ROW_COLUMNS

    def _with_access(self, access: list[Clause], read):
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

    # -- reads ----------------------------------------------------------------------------------------------
    def count(self, groups=None) -> int:
        """Chunks in the collection; with `groups`, only those readable by them."""
        if not self.exists():
            return 0
        access = [] if groups is None else [readable_by(groups)]
        return self._with_access(access, lambda sql: self.table().count_rows(sql) if sql else
                                 self.table().count_rows())

    def version(self) -> int:
        return self.table().version

    def scan(self, columns: list[str], where: str | None = None, groups=None) -> pa.Table:
        """Rows of the collection (`where`: SQL); with `groups`, only the chunks readable by them."""
        access = [] if groups is None else [readable_by(groups)]
        return self._with_access(access, lambda sql: self._scan(
            columns, " AND ".join(f"({w})" for w in (where, sql) if w) or None))

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
        """doc_id -> {doc_hash, source, chunks} for every indexed document."""
        rows = self.scan(["doc_id", "doc_hash", "source"]).to_pylist()
        states: dict[str, dict] = {}
        for row in rows:
            state = states.setdefault(row["doc_id"], {"doc_hash": row["doc_hash"], "source": row["source"],
                                                      "chunks": 0, "hashes": set()})
            state["chunks"] += 1
            state["hashes"].add(row["doc_hash"])
        return states

    def list_documents(self, groups=None) -> list[dict]:
        """The documents (with `groups`: those readable by them), each with its chunks and last page."""
        rows = self.scan(["doc_id", "source", "title", "page"], groups=groups).to_pylist()
        docs: dict[str, dict] = {}
        for row in rows:
            doc = docs.setdefault(row["doc_id"], {"doc_id": row["doc_id"], "title": row["title"],
                                                  "source": row["source"], "chunks": 0, "pages": set()})
            doc["chunks"] += 1
            if row["page"] is not None:
                doc["pages"].add(row["page"])
        out = []
        for doc in sorted(docs.values(), key=lambda d: (d["source"], d["doc_id"])):
            doc["pages"] = max(doc["pages"]) if doc["pages"] else None
            out.append(doc)
        return out

    def document_chunks(self, doc_id: str, groups=None) -> list[Passage]:
        """The chunks of one document, in order ([] for a document the collection does not hold or, with
        `groups`, that they may not read)."""
        rows = self.scan(ROW_COLUMNS, where=f"doc_id = {_sql_list([doc_id])}", groups=groups).to_pylist()
        return [Passage.from_row(row) for row in sorted(rows, key=lambda row: row["chunk_index"])]

    # -- writes ---------------------------------------------------------------------------------------------
    def write_documents(self, doc_ids: list[str], chunks: list[Chunk], vectors: np.ndarray,
                        window_vectors: list[np.ndarray] | None = None, e5_vectors: np.ndarray | None = None) -> None:
        """Replace the chunks of `doc_ids` with `chunks` in one atomic commit (inserts, updates and deletes).
        A collection with window vectors needs `window_vectors`: one (windows x dim) array per chunk; one with e5
        vectors needs `e5_vectors`, one per chunk."""
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
        vec = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), self.dim)
        columns["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vec.ravel()), self.dim)
        if WINDOW_COLUMN in tbl.schema.names:
            if window_vectors is None or len(window_vectors) != len(chunks) or \
                    any(len(w) == 0 for w in window_vectors):
                raise ValueError(f"collection {self.collection!r} holds window vectors: give at least one per chunk")
            flat = np.concatenate([np.asarray(w, dtype=np.float32).reshape(-1, self.dim) for w in window_vectors]) \
                if window_vectors else np.zeros((0, self.dim), dtype=np.float32)
            offsets = np.cumsum([0] + [len(w) for w in window_vectors]).astype(np.int32)
            columns[WINDOW_COLUMN] = pa.ListArray.from_arrays(
                pa.array(offsets), pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), self.dim))
        if E5_COLUMN in tbl.schema.names:
            e5_dim = _e5_dim(tbl)
            if e5_vectors is None or len(e5_vectors) != len(chunks):
                raise ValueError(f"collection {self.collection!r} holds e5 vectors: give one per chunk")
            flat = np.asarray(e5_vectors, dtype=np.float32).reshape(len(chunks), e5_dim)
            columns[E5_COLUMN] = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), e5_dim)
        data = pa.table(columns, schema=pa.schema([f for f in tbl.schema]))
        (
            tbl.merge_insert("chunk_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(f"doc_id IN ({_sql_list(doc_ids)})")
            .execute(data)
        )

    def delete_documents(self, doc_ids: Iterable[str], groups=None) -> int:
        """Delete the documents' chunks (with `groups`: only those readable by them); the number deleted."""
        doc_ids = list(doc_ids)
        if not doc_ids or not self.exists():
            return 0
        tbl = self.table()
        before = tbl.count_rows()
        access = [] if groups is None else [readable_by(groups)]
        self._with_access(access, lambda sql: tbl.delete(
            f"doc_id IN ({_sql_list(doc_ids)})" + (f" AND {sql}" if sql else "")))
        return before - tbl.count_rows()

    def refresh_indexes(self) -> None:
        """Bring the search indexes up to date; cheap when nothing changed, so every ingest ends with it.

        - small fragments left by batch commits are compacted and rows written since the indexes were built are
          folded into them (first, so a new index is built over compacted files and needs no remapping);
        - the native BM25 full-text index over `search_text` is created once, then updated incrementally;
        - the ANN vector index (`vector_index`) is added once the table reaches `vector_index.min_rows` (below
          that, exact search is fast enough and loses nothing); with e5 vectors, one for them too.
        Rows written after an index was built are still searched (exhaustively) until the next refresh, so a
        crash between a write and this call costs speed, never results.
        """
        tbl = self.table()
        if tbl.count_rows() == 0:
            return
        stale = any((ix.num_unindexed_rows or 0) > 0 for ix in tbl.list_indices())
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

        self.table().create_index("search_text", config=FTS(
            with_position=False, stem=self.fts_stem, remove_stop_words=self.fts_remove_stop_words,
            lower_case=True, ascii_folding=True), replace=True)
        return True

    def has_vector_index(self, column: str | None = None) -> bool:
        """Whether `column` (default: the one dense search scans) has an ANN index."""
        column = column or self.vector_column
        return any(ix.index_type.upper().startswith("IVF") and column in ix.columns
                   for ix in self.table().list_indices())

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
        `vector_index.min_rows` and there is none yet; likewise for the e5 vectors (one per chunk)."""
        built = False
        if not self.vector_index.min_rows:
            return built
        if not self.has_vector_index() and self.searched_vectors() >= self.vector_index.min_rows:
            self.build_vector_index()
            built = True
        if self.has_e5 and not self.has_vector_index(E5_COLUMN) \
                and self.table().count_rows() >= self.vector_index.min_rows:
            self.build_vector_index(E5_COLUMN)
            built = True
        return built

    def build_vector_index(self, column: str | None = None) -> None:
        """(Re)build the ANN vector index of `column` (default: the one dense search scans) as `vector_index`
        describes, replacing any other on that column."""
        tbl = self.table()
        column = column or self.vector_column
        dim = _e5_dim(tbl) if column == E5_COLUMN else self.dim
        tbl.create_index(column, config=self.vector_index.index_config(tbl.count_rows(), dim), replace=True)

    def has_text_index(self) -> bool:
        return "FTS" in self._index_types()

    def optimize(self) -> None:
        """Compact small files, fold new rows into the indexes, prune versions older than an hour."""
        from datetime import timedelta

        self.table().optimize(cleanup_older_than=timedelta(hours=1))

    # -- search ---------------------------------------------------------------------------------------------
    def vector_search(self, vector: np.ndarray, k: int, where: list[Clause] | None = None,
                      column: str | None = None) -> list[Passage]:
        """The k chunks nearest `vector`, scored by cosine similarity: of the chunk's vector, or, in a collection
        with window vectors, of its best window; `column` E5_COLUMN searches the e5 vectors instead."""
        if column == E5_COLUMN and not self.has_e5:
            raise StoreError(f"collection {self.collection!r} holds no e5 vectors (it was built without "
                             "retrieve.retrievers.e5.enabled): ingest into a new collection with it enabled")
        column = column or self.vector_column
        query = self.table().search(np.asarray(vector, dtype=np.float32), vector_column_name=column) \
            .distance_type("cosine").select(ROW_COLUMNS + ["_distance"]).limit(k)
        # over the multivector column LanceDB's cosine distance is 1 - the best window's cosine (MaxSim)
        min_ef = MULTIVECTOR_HITS_PER_K * k if column == WINDOW_COLUMN else 0
        return self._passages(self.vector_index.tune(query, min_ef), where, lambda row: 1.0 - float(row["_distance"]))

    def text_search(self, text: str, k: int, where: list[Clause] | None = None) -> list[Passage]:
        if not text.strip():
            return []
        query = self.table().search(text, query_type="fts", fts_columns="search_text") \
            .select(ROW_COLUMNS + ["_score"]).limit(k)
        return self._passages(query, where, lambda row: float(row["_score"]))

    def _passages(self, query, where: list[Clause] | None, score) -> list[Passage]:
        """Run `query` with the filter inside it (prefilter: the top k are all admitted), access clauses first."""
        access = [c for c in where or [] if c.op == READABLE]
        narrowing = to_sql([c for c in where or [] if c.op != READABLE])

        def read(access_sql: str | None):
            sql = " AND ".join(w for w in (access_sql, narrowing) if w)
            return (query.where(sql, prefilter=True) if sql else query).to_arrow().to_pylist()

        out = []
        for row in self._with_access(access, read):
            p = Passage.from_row(row)
            p.score = score(row)
            out.append(p)
        return out

    def vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored (title + text) vectors of some chunks, so checks need not embed passages again."""
        if not chunk_ids:
            return {}
        rows = self.scan(["chunk_id", "vector"], where=f"chunk_id IN ({_sql_list(chunk_ids)})")
        vecs = rows["vector"].to_numpy(zero_copy_only=False)
        return {cid: np.asarray(v, dtype=np.float32) for cid, v in zip(rows["chunk_id"].to_pylist(), vecs)}

    def dense_vectors(self, chunk_ids: list[str] | None = None,
                      doc_ids: list[str] | None = None) -> dict[str, tuple[str, np.ndarray]]:
        """chunk_id -> (doc_id, the vectors dense search scores the chunk by: its windows, or its one vector as a
        1 x dim array), for the given chunks or the chunks of the given documents."""
        column, ids = self.vector_column, chunk_ids if chunk_ids is not None else doc_ids
        key = "chunk_id" if chunk_ids is not None else "doc_id"
        if not ids:
            return {}
        wanted = set(ids)
        # a long IN (...) list is slower for LanceDB than one scan filtered here
        where = f"{key} IN ({_sql_list(wanted)})" if len(wanted) <= 1000 else None
        out = {}
        for row in self.scan(["chunk_id", "doc_id", column], where=where).to_pylist():
            if row[key] in wanted:
                vectors = np.asarray(row[column], dtype=np.float32).reshape(-1, self.dim)
                out[row["chunk_id"]] = (row["doc_id"], vectors)
        return out

    def fetch(self, chunk_ids: list[str]) -> dict[str, Passage]:
        if not chunk_ids:
            return {}
        rows = self.scan(ROW_COLUMNS, where=f"chunk_id IN ({_sql_list(chunk_ids)})").to_pylist()
        return {row["chunk_id"]: Passage.from_row(row) for row in rows}
