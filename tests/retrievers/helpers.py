"""Small builders the retriever tests share: unit vectors and hand-made chunks."""

import numpy as np

from switchyard.retrievers.documents import Chunk


def unit(*values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def make_chunk(chunk_id: str, text: str | None = None, title: str = "") -> Chunk:
    """A chunk of document `doc::N` as ingest would write it (text defaults to the chunk id)."""
    text = chunk_id if text is None else text
    doc_id, index = chunk_id.split("::")
    return Chunk(
        chunk_id=chunk_id,
        doc_id=doc_id,
        source="s",
        title=title,
        text=text,
        chunk_index=int(index),
        start_char=0,
        end_char=len(text),
        page=None,
        page_end=None,
        content_hash="",
        doc_hash="h",
    )
