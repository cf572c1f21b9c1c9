"""Lexical (BM25) retrievers over a collection: LanceDB's native FTS index, or rank-bm25 in memory.

The LanceDB backend is fast and persistent but hides k1/b; the rank-bm25 backend exposes k1, b and the
tokenizer (lower-casing, stop words, Porter stemming) and is rebuilt in memory whenever the table changes.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np

from switchyard.configs.schema import RANK_BM25_MAX_CHUNKS
from switchyard.errors import CollectionTooLargeError
from switchyard.retrievers.documents import Passage, search_text
from switchyard.retrievers.filters import ACL_FIELD, Clause, to_predicate
from switchyard.retrievers.store import FullTextSearch, IndexStore
from switchyard.retrievers.third_party import import_keeping_environment
from switchyard.run_context import ALL
from switchyard.stop_words import ENGLISH_STOP_WORDS

_WORD = re.compile(r"\w+", re.UNICODE)


class Tokenizer:
    """Lower-case word tokens, optionally without English stop words and Porter-stemmed."""

    def __init__(self, stem: bool = True, remove_stop_words: bool = True):
        self.stem = stem
        self.remove_stop_words = remove_stop_words
        if stem:
            self._stemmer = import_keeping_environment("nltk.stem").PorterStemmer()
            self._stem = lru_cache(maxsize=200_000)(self._stemmer.stem)

    def __call__(self, text: str) -> list[str]:
        tokens = _WORD.findall(text.lower())
        if self.remove_stop_words:
            tokens = [t for t in tokens if t not in ENGLISH_STOP_WORDS]
        if self.stem:
            tokens = [self._stem(t) for t in tokens]
        return tokens


@lru_cache(maxsize=1)
def content_tokenizer() -> Tokenizer:
    """Lower-case word tokens without English stop words, unstemmed: a text's content words, as query rewriting and the
    history step compare them (stateless, so one instance serves every thread)."""
    return Tokenizer(stem=False, remove_stop_words=True)


class LanceBM25Retriever:
    """BM25 through LanceDB's native full-text index."""

    name = "bm25"

    def __init__(self, store: IndexStore, top_k: int = 100):
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        self.store = store
        self.top_k = top_k

    def run(self, query: str, top_k: int | None = None, where: list[Clause] | None = None) -> list[Passage]:
        return FullTextSearch(self.store).run(query, top_k or self.top_k, where)


def _lucene_idf_bm25():
    from rank_bm25 import BM25Okapi

    class LuceneIdfBM25(BM25Okapi):
        """BM25Okapi with Lucene's idf, log(1 + (N - n + 0.5) / (n + 0.5)), which is always positive.

        rank-bm25's own idf is 0 or negative for terms in half or more of the chunks, so in a small collection
        a chunk that matches the query can score 0 and vanish.
        """

        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))

    return LuceneIdfBM25


def _LuceneIdfBM25(corpus, k1, b):
    return _lucene_idf_bm25()(corpus, k1=k1, b=b)


class _Scorer(Protocol):
    """What a search needs of rank-bm25's BM25Okapi: a score per chunk for the query's tokens."""

    def get_scores(self, query: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class _Snapshot:
    version: int
    rows: list[dict]
    bm25: _Scorer | None


class RankBM25Retriever:
    """BM25 (Okapi) with explicit k1, b and tokenizer, computed by rank-bm25 over the collection's chunks."""

    name = "bm25"

    def __init__(
        self,
        store: IndexStore,
        top_k: int = 100,
        k1: float = 1.2,
        b: float = 0.75,
        stem: bool = True,
        remove_stop_words: bool = True,
        max_chunks: int = RANK_BM25_MAX_CHUNKS,
    ):
        if top_k < 1 or k1 <= 0 or not 0 <= b <= 1 or max_chunks < 1:
            raise ValueError("need top_k >= 1, k1 > 0, 0 <= b <= 1 and max_chunks >= 1")
        self.max_chunks = max_chunks
        self.store = store
        self.top_k = top_k
        self.k1, self.b = k1, b
        self.tokenizer = Tokenizer(stem=stem, remove_stop_words=remove_stop_words)
        self._index: _Snapshot | None = None
        self._build_lock = threading.Lock()

    def _current(self) -> _Snapshot:
        """The index of the table's current version, rebuilt (by one thread, the others wait) when it changed.
        Rows and scorer are swapped together as one snapshot, so a search never pairs old rows with new scores."""
        version = self.store.version()
        index = self._index
        if index is None or index.version != version:
            with self._build_lock:
                index = self._index
                if index is None or index.version != version:
                    self._check_size()
                    rows = self._rows()
                    corpus = [self.tokenizer(search_text(r["title"], r["text"])) or [""] for r in rows]
                    index = _Snapshot(version, rows, _LuceneIdfBM25(corpus, k1=self.k1, b=self.b) if corpus else None)
                    self._index = index
        return index

    def _rows(self) -> list[dict]:
        """Every chunk with its access labels when the collection has them (if the column appeared during the
        scan, scanned again with it: a labelled chunk never looks unlabelled)."""
        columns = self.store.row_columns()
        # every chunk (scope ALL) with its labels: the caller's access clause is applied per query, in `run`
        rows = self.store.scan(columns, scope=ALL).to_pylist()
        if ACL_FIELD not in columns and self.store.has_acl():
            rows = self.store.scan(self.store.row_columns(), scope=ALL).to_pylist()
        return rows

    def _check_size(self) -> None:
        n = self.store.count(ALL)
        if n > self.max_chunks:
            raise CollectionTooLargeError(
                f"collection {self.store.collection!r} has {n:,} chunks, more than the rank_bm25 backend's limit "
                f"(retrieve.retrievers.bm25.max_chunks = {self.max_chunks:,}): it holds every chunk in memory and "
                "scores them all in Python for each query; use retrieve.retrievers.bm25.backend=lancedb (the "
                "native full-text index) or raise max_chunks"
            )

    def run(self, query: str, top_k: int | None = None, where: list[Clause] | None = None) -> list[Passage]:
        index = self._current()
        tokens = self.tokenizer(query)
        if index.bm25 is None or not tokens:
            return []
        scores = np.asarray(index.bm25.get_scores(tokens), dtype=np.float64)
        if where:
            keep = to_predicate(where)
            scores[[not keep(r) for r in index.rows]] = -np.inf
        k = min(top_k or self.top_k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]
        out = []
        for i in top:
            if not np.isfinite(scores[i]) or scores[i] <= 0:  # no query term occurs in it
                continue
            p = Passage.from_row(index.rows[i])
            p.score = float(scores[i])
            out.append(p)
        return out
