"""Ingestion: load -> clean -> chunk -> embed -> write, incrementally and crash-safely.

A document whose content hash (text, title, chunking and embedding settings) is unchanged is skipped; a changed
one is replaced; documents that disappeared from a corpus file that still loads cleanly are removed. Each batch of
documents is written by one atomic commit (see IndexStore.write_documents), so killing an ingest at any moment
leaves every document either as it was or fully replaced, and re-running finishes the job.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from switchyard.errors import NotFound, program
from switchyard.retrievers.chunking import Chunker, SentenceWindows
from switchyard.retrievers.documents import LoadError, SourceDocument, search_text, sha256_hex
from switchyard.retrievers.embedder import TextEmbedder
from switchyard.retrievers.filters import ACL_FIELD, parse_labels, scope_clauses, to_predicate
from switchyard.retrievers.loaders import iter_files, load_file
from switchyard.retrievers.store import IndexStore
from switchyard.run_context import ALL, AllScope, Scope


def corpus_collection(
    paths: list[Path],
    chunk_size: int,
    chunk_overlap: int,
    embedding_model: str,
    prefix: str = "eval",
    windows: tuple[int, int] | None = None,
    fields: Iterable[str] = (),
    vectors: str | Path | None = None,
) -> str:
    """A collection name keyed by the corpus content and the settings that shape the index, so benchmark runs
    ingest a corpus once and reuse it. `fields`: the keys of the vector fields it holds (`field_key`). `vectors`: the vector recording the index is built from (its folder), so a
    replay never reuses an index embedded by this machine's runtime."""
    h = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            h.update(f.name.encode())
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    key = [chunk_size, chunk_overlap, embedding_model] + ([list(windows)] if windows else []) + list(fields)
    key += [f"vectors:{Path(vectors).expanduser().resolve()}"] if vectors else []
    h.update(json.dumps(key).encode())
    return f"{prefix}-{h.hexdigest()[:12]}"


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks_written: int = 0
    files: int = 0
    errors: list[LoadError] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ingested(self) -> int:
        return self.added + self.updated + self.unchanged

    def summary(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {self.removed} removed; "
            f"{self.chunks_written} chunks written from {self.files} file(s) in {self.seconds:.1f}s; "
            f"{len(self.errors)} error(s)"
        )


@dataclass(frozen=True)
class FieldEncoder:
    """How a vector field embeds a chunk at ingest: its model, with its passage prefix."""

    embedder: TextEmbedder
    passage_prefix: str = ""


class Ingestor:
    def __init__(
        self,
        store: IndexStore,
        embedder: TextEmbedder,
        chunker: Chunker,
        batch_docs: int = 64,
        progress: bool | None = None,
        windows: SentenceWindows | None = None,
        fields: dict[str, FieldEncoder] | None = None,
    ):
        """`windows` must be given exactly when the collection holds window vectors (IndexStore.windows), `fields`
        (name -> its encoder) for exactly the vector fields it holds (IndexStore.vector_fields)."""
        if batch_docs < 1:
            raise ValueError("batch_docs must be >= 1")
        self.store = store
        self.embedder = embedder
        self.chunker = chunker
        self.windows = windows
        self.fields = dict(fields or {})
        self.batch_docs = batch_docs
        # None: show bars only on a terminal
        self.progress = progress if progress is not None else sys.stderr.isatty()

    def doc_hash(self, doc: SourceDocument) -> str:
        settings = f"{self.chunker.chunk_size}/{self.chunker.chunk_overlap}/{self.embedder.model_name}"
        if self.windows:
            settings += f"/windows {self.windows.window_tokens}/{self.windows.window_overlap}"
        for name, encoder in self.fields.items():
            settings += f"/{name} {encoder.embedder.model_name}"
        if doc.acl:  # only when labelled: documents indexed before labels existed keep their hashes
            settings += f"/acl {','.join(doc.acl)}"
        return sha256_hex(doc.title, doc.text, repr(doc.page_starts), settings)

    def run(
        self,
        paths: Sequence[str | Path],
        acl: str | list[str] | None = None,
        executor: IngestExecutor | None = None,
        scope: Scope = ALL,
    ) -> IngestReport:
        """`acl`: access labels for the documents that carry none of their own (a corpus record's `acl` field);
        re-ingesting with other labels updates them. `executor` reads the files and prepares (chunks and embeds)
        the batches; default: this process (retrievers/ray_ingest.py does both on a Ray cluster). Whoever does
        them, the decisions (what is unchanged, updated or removed) and the commits are made here. `scope`: what
        the writer may read; an indexed document outside it is neither replaced nor removed, and is reported like
        one that does not exist."""
        from tqdm import tqdm

        executor = executor or LocalExecutor(self.prepare)
        default_acl = parse_labels(acl)
        started = time.perf_counter()
        report = IngestReport()
        states = self.store.doc_states() if self.store.exists() else {}
        hidden = hidden_documents(self.store, scope)
        pending: list[tuple[SourceDocument, str]] = []
        vanished: set[str] = set()
        seen: set[str] = set()

        files = list(iter_files(paths))
        loaded = iter(executor.load([f for f in files if not isinstance(f, LoadError)]))
        for item in tqdm(files, desc="loading", unit="file", disable=not self.progress):
            if isinstance(item, LoadError):
                report.errors.append(item)
                continue
            docs = next(loaded)
            report.files += 1
            source = str(item.resolve())
            file_errors = 0
            file_docs: set[str] = set()
            for doc in docs:
                if isinstance(doc, LoadError):
                    report.errors.append(doc)
                    file_errors += 1
                    continue
                if default_acl and not doc.acl:
                    doc.acl = default_acl
                if doc.doc_id in seen:
                    report.errors.append(LoadError(doc.source, f"duplicate document id {doc.doc_id!r}; skipped"))
                    continue
                if doc.doc_id in hidden:
                    report.errors.append(LoadError(doc.source, f"{not_writable(doc.doc_id)}; skipped"))
                    continue
                state = states.get(doc.doc_id)
                if state and state["source"] != doc.source:
                    report.errors.append(
                        LoadError(
                            doc.source, f"document id {doc.doc_id!r} is already indexed from {state['source']}; skipped"
                        )
                    )
                    continue
                seen.add(doc.doc_id)
                file_docs.add(doc.doc_id)
                digest = self.doc_hash(doc)
                if state and state["hashes"] == {digest}:
                    report.unchanged += 1
                else:
                    pending.append((doc, digest))
            if file_errors == 0:  # never delete on a partial read
                vanished |= {
                    d for d, s in states.items() if s["source"] == source and d not in file_docs and d not in hidden
                }

        bar = tqdm(total=len(pending), desc="indexing", unit="doc", disable=not self.progress)
        batches = [pending[start : start + self.batch_docs] for start in range(0, len(pending), self.batch_docs)]
        for batch, prepared in zip(batches, executor.prepare(batches)):  # in order: the commits of a local run
            self.store.write_documents(
                [doc.doc_id for doc, _ in batch],
                prepared.chunks,
                prepared.vectors,
                prepared.window_vectors,
                prepared.field_vectors,
            )
            for doc, _ in batch:
                if doc.doc_id in states:
                    report.updated += 1
                else:
                    report.added += 1
            report.chunks_written += len(prepared.chunks)
            bar.update(len(batch))
        bar.close()

        if vanished:
            self.store.delete_documents(sorted(vanished), scope=ALL)  # the ingest owns the collection
            report.removed = len(vanished)
        if self.store.exists():
            self.store.refresh_indexes()
        report.seconds = time.perf_counter() - started
        return report

    def prepare(self, batch: list[tuple[SourceDocument, str]]) -> PreparedBatch:
        """Chunk and embed a batch of (document, content hash): what one commit writes."""
        return prepare_batch(batch, self.chunker, self.embedder, self.windows, self.fields)


@dataclass
class PreparedBatch:
    """A batch of documents chunked and embedded, ready for IndexStore.write_documents."""

    chunks: list
    vectors: np.ndarray
    window_vectors: list[np.ndarray] | None
    field_vectors: dict[str, np.ndarray] = field(default_factory=dict)


def prepare_batch(
    batch: list[tuple[SourceDocument, str]],
    chunker: Chunker,
    embedder: TextEmbedder,
    windows: SentenceWindows | None,
    fields: dict[str, FieldEncoder] | None = None,
) -> PreparedBatch:
    """Chunk a batch of (document, content hash) and embed its chunks (and their windows, and with `fields` each
    vector field's vectors): the one way a batch is prepared, in this process or in a Ray actor."""
    chunks = []
    for doc, digest in batch:
        chunks.extend(chunker.run(doc, digest))
    texts = [search_text(c.title, c.text) for c in chunks]
    vectors = embedder.run(texts)
    window_vectors = _window_vectors(embedder, windows, chunks, texts, vectors) if windows else None
    field_vectors = {
        name: encoder.embedder.run([encoder.passage_prefix + t for t in texts])
        for name, encoder in (fields or {}).items()
    }
    return PreparedBatch(chunks, vectors, window_vectors, field_vectors)


def load_documents(path: Path) -> list[SourceDocument | LoadError]:
    """One file's documents (cleaned) and load errors, in file order."""
    return list(load_file(path))


class IngestExecutor(Protocol):
    """Who reads the files and prepares the batches of an ingest; each yields its results in input order."""

    def load(self, files: list[Path]) -> Iterable[list[SourceDocument | LoadError]]: ...

    def prepare(self, batches: list[list[tuple[SourceDocument, str]]]) -> Iterable[PreparedBatch]: ...


class LocalExecutor:
    """Reads and prepares in this process, lazily (one batch in memory at a time)."""

    def __init__(self, prepare):
        self._prepare = prepare

    def load(self, files: list[Path]):
        return (load_documents(f) for f in files)

    def prepare(self, batches: list[list[tuple[SourceDocument, str]]]):
        return (self._prepare(batch) for batch in batches)


def _window_vectors(
    embedder: TextEmbedder, windows: SentenceWindows, chunks: list, texts: list[str], vectors: np.ndarray
) -> list[np.ndarray]:
    """Each chunk's window vectors; a window that is the chunk's whole search text reuses the chunk's vector."""
    known = dict(zip(texts, vectors))
    per_chunk = [windows.run(c) for c in chunks]
    todo = list(dict.fromkeys(w for ws in per_chunk for w in ws if w not in known))
    if todo:
        known.update(zip(todo, embedder.run(todo)))
    return [np.stack([known[w] for w in ws]) for ws in per_chunk]


def matching_documents(docs: list[dict], targets: Iterable[str]) -> list[str]:
    """The ids of the indexed documents (`docs`, as IndexStore.list_documents gives them) that `targets` name: each
    target is a document id or, when no id is that, a file or folder path (a folder: every document under it).
    A target matching nothing is a NotFound, so that nothing is deleted on a typo."""
    matched: set[str] = set()
    for target in targets:
        found = {d["doc_id"] for d in docs if d["doc_id"] == target}
        path = Path(target).expanduser()
        if not found and (path.exists() or os.sep in target or "." in target):
            resolved = str(path.resolve())
            found = {
                d["doc_id"]
                for d in docs
                if d["source"] == resolved or d["source"].startswith(resolved.rstrip(os.sep) + os.sep)
            }
        if not found:
            raise NotFound(f"no indexed document matches {target!r} (see `{program()} list`); nothing deleted")
        matched |= found
    return sorted(matched)


def hidden_documents(store: IndexStore, scope: Scope) -> dict[str, str]:
    """doc_id -> source of the indexed documents that `scope` may not read (none for ALL)."""
    if isinstance(scope, AllScope) or not store.exists() or not store.has_acl():  # no labels: every one readable
        return {}
    readable = to_predicate(scope_clauses(scope))  # the read rule of the queries, on one scan of the labels
    rows = store.scan(["doc_id", "source", ACL_FIELD], scope=ALL).to_pylist()
    return {row["doc_id"]: row["source"] for row in rows if not readable(row)}


def not_writable(doc_id: str) -> str:
    """What a writer is told of a document it may not read: the words of one that does not exist."""
    return f"no document {doc_id!r} to change with this key"


def delete_matching(store: IndexStore, targets: Iterable[str], scope: Scope | None) -> tuple[int, int]:
    """Delete the documents `targets` name (ids or source paths, `matching_documents`), all or none: (documents,
    chunks) deleted. `scope`: the caller's access groups or ALL, required as IndexStore.list_documents takes it."""
    doomed = matching_documents(store.list_documents(scope), targets)
    return len(doomed), store.delete_documents(doomed, scope)
