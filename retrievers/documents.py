"""Plain records passed between loading, chunking and the store."""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from typing import Any

from switchyard.retrievers.injection import instruction_score


def sha256_hex(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


@dataclass
class SourceDocument:
    """One document as loaded: its full cleaned text and, for paged formats, where each page starts."""

    doc_id: str
    source: str
    title: str
    text: str
    # (start_char, page_number) pairs sorted by start_char; empty for formats without pages.
    page_starts: list[tuple[int, int]] = field(default_factory=list)
    acl: tuple[str, ...] = ()  # access labels (retrievers/filters.py); empty: readable by anyone with the collection

    def page_at(self, offset: int) -> int | None:
        if not self.page_starts:
            return None
        starts = [s for s, _ in self.page_starts]
        i = bisect.bisect_right(starts, offset) - 1
        return self.page_starts[max(i, 0)][1]

    def last_page_in(self, start: int, end: int) -> int | None:
        """The highest page number the span [start, end) touches (footnotes moved to the end keep their page)."""
        first = self.page_at(start)
        if first is None:
            return None
        return max([first] + [page for offset, page in self.page_starts if start <= offset < end])


@dataclass
class Chunk:
    chunk_id: str
    doc_id: str
    source: str
    title: str
    text: str
    chunk_index: int
    start_char: int
    end_char: int
    page: int | None
    page_end: int | None
    content_hash: str
    doc_hash: str
    acl: str | None = None  # the document's access labels as stored (filters.encode_labels); None: unlabelled


@dataclass
class LoadError:
    """A file (or record) that could not be loaded, with a one-line reason."""

    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


PASSAGE_FIELDS = ("chunk_id", "doc_id", "source", "title", "text", "page", "page_end", "start_char", "end_char")


@dataclass
class Passage:
    """A retrieved chunk with every score it collected on the way (per retriever, fused, reranked)."""

    chunk_id: str
    doc_id: str
    source: str
    title: str
    text: str
    page: int | None = None
    page_end: int | None = None
    start_char: int = 0
    end_char: int = 0
    score: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def injection(self) -> float:
        """The instruction-likeness of the chunk text (retrievers/injection.py), computed on read (cached per text),
        so every index, old or new, gives the same value; not part of the passage's JSON."""
        return instruction_score(self.text)

    @classmethod
    def from_row(cls, row: dict) -> Passage:
        fields: dict[str, Any] = {k: row.get(k) for k in PASSAGE_FIELDS}  # a stored row: its columns are untyped
        return cls(**fields)

    def to_dict(self) -> dict:
        return {
            **{k: getattr(self, k) for k in PASSAGE_FIELDS},
            "score": self.score,
            "scores": dict(self.scores),
            "ranks": dict(self.ranks),
        }


def search_text(title: str, text: str) -> str:
    """What BM25 and the embedder see for a chunk or window: the title, then the text (titles carry much of a short
    document's topic), unless the text already starts with the title."""
    return f"{title}\n{text}" if title and title not in text[: len(title) + 8] else text
