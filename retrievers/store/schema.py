"""The columns of a collection and the metadata its schema records.

Every collection holds the chunk columns, the access labels (`acl`), the text BM25 and the embedder see
(`search_text`) and one vector per chunk (`vector`, the embedding model's). Optional, chosen when the collection is
created: sentence-window vectors (`window_vectors`, a multivector column) and any number of named vector fields, one
vector per chunk from another model each (`<name>_vector`, configured under retrieve.retrievers; `<name>_dim` in the
metadata). A collection keeps the columns it was created with; what it holds is read from its schema.
"""

from __future__ import annotations

import json

import pyarrow as pa

from switchyard.errors import StoreError
from switchyard.retrievers.filters import ACL_FIELD

META_KEY = b"switchyard"
CHUNK_FIELDS = [
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
ROW_COLUMNS = [f.name for f in CHUNK_FIELDS]
# A document's access labels (retrievers/filters.py); collections made before labels existed lack the column until a
# labelled document is written to them, and read as unlabelled until then.
ACL = pa.field(ACL_FIELD, pa.string())
# What BM25 and the embedder see: the title, then the chunk text (titles carry much of a short document's topic).
SEARCH_FIELD = pa.field("search_text", pa.string())
# The embedding model's vector of each chunk
VECTOR_COLUMN = "vector"
# A collection built with sentence windows (ingest.window_tokens) holds each chunk's window vectors here, a LanceDB
# multivector column: a vector search over it scores a row by its best window (MaxSim with one query vector).
WINDOW_COLUMN = "window_vectors"
_FIELD_SUFFIX = "_vector"


def field_column(name: str) -> str:
    """The column of the named vector field."""
    return name + _FIELD_SUFFIX


def collection_schema(
    embedding_model: str,
    embedding_backend: str,
    dim: int,
    windows: tuple[int, int] | None,
    vector_fields: dict[str, int],
) -> pa.Schema:
    """The schema a new collection is created with (`vector_fields`: name -> dimension)."""
    meta: dict = {"embedding_model": embedding_model, "embedding_backend": embedding_backend, "dim": dim}
    fields = CHUNK_FIELDS + [ACL, SEARCH_FIELD, pa.field(VECTOR_COLUMN, pa.list_(pa.float32(), dim))]
    if windows:
        meta["windows"] = list(windows)
        fields.append(pa.field(WINDOW_COLUMN, pa.list_(pa.list_(pa.float32(), dim))))
    for name, field_dim in vector_fields.items():
        meta[f"{name}_dim"] = field_dim
        fields.append(pa.field(field_column(name), pa.list_(pa.float32(), field_dim)))
    return pa.schema(fields, metadata={META_KEY: json.dumps(meta).encode()})


def recorded_meta(table) -> dict:
    """What a collection's schema metadata records (embedding model, dim, backend); {} if nothing."""
    raw = (table.schema.metadata or {}).get(META_KEY)
    return json.loads(raw) if raw else {}


def table_vector_fields(table) -> dict[str, int]:
    """The named vector fields a collection holds: name -> dimension, from its columns."""
    return {
        f.name[: -len(_FIELD_SUFFIX)]: f.type.list_size
        for f in table.schema
        if f.name.endswith(_FIELD_SUFFIX) and f.name != VECTOR_COLUMN
    }


def table_windows(table) -> tuple[int, int] | None:
    """(window_tokens, window_overlap) of a collection's window vectors, None if it has none."""
    recorded = recorded_meta(table).get("windows")
    return tuple(recorded) if recorded and WINDOW_COLUMN in table.schema.names else None


def check_compatible(table, collection: str, embedding_model: str, dim: int) -> None:
    """Refuse a collection built with another embedding model or dimension (the backend is not checked: the
    backends run the same weights, so the recorded one is provenance, not a constraint)."""
    meta = recorded_meta(table)
    if meta and (meta.get("embedding_model") != embedding_model or meta.get("dim") != dim):
        raise StoreError(
            f"collection {collection!r} was built with embedding model {meta.get('embedding_model')!r} "
            f"(dim {meta.get('dim')}), but the config uses {embedding_model!r} (dim {dim}); "
            "use another collection or re-ingest"
        )


def sql_list(values) -> str:
    """Strings as a SQL list body: 'a', 'b''s'."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)
