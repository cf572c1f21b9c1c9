"""The index store, split by job (the Haystack way): a small store API and retrieval components on top.

- index_store.py `IndexStore`: tables, schema, writes, deletes, scoped reads (count, scan, listings), index upkeep
- schema.py: the columns of a collection and its recorded metadata (vector fields: `<name>_vector`)
- connection.py: the LanceDB connection, storage options and their secrets
- vector_index.py: the ANN index a `VectorIndexConfig` describes
- queries.py: `FullTextSearch`, `VectorSearch`, `ChunkFetch`, one per query type
"""

from switchyard.retrievers.filters import ACL_FIELD
from switchyard.retrievers.store.connection import ENV_PREFIX, redact_storage_options, resolve_storage_options
from switchyard.retrievers.store.index_store import IndexStore
from switchyard.retrievers.store.queries import CHUNK_VECTORS, ChunkFetch, FullTextSearch, VectorSearch
from switchyard.retrievers.store.schema import (
    ACL,
    META_KEY,
    ROW_COLUMNS,
    SEARCH_FIELD,
    VECTOR_COLUMN,
    WINDOW_COLUMN,
    field_column,
)
from switchyard.retrievers.store.vector_index import MULTIVECTOR_HITS_PER_K

E5_COLUMN = field_column("e5")  # the column of the e5 vector field (retrieve.retrievers.e5), for its importers

__all__ = [
    "ACL",
    "ACL_FIELD",
    "CHUNK_VECTORS",
    "ChunkFetch",
    "E5_COLUMN",
    "ENV_PREFIX",
    "FullTextSearch",
    "IndexStore",
    "META_KEY",
    "MULTIVECTOR_HITS_PER_K",
    "ROW_COLUMNS",
    "SEARCH_FIELD",
    "VECTOR_COLUMN",
    "VectorSearch",
    "WINDOW_COLUMN",
    "field_column",
    "redact_storage_options",
    "resolve_storage_options",
]
