"""Query adapters: a linear correction of query vectors for dense search, learned from labelled queries.

An adapter maps a query vector q to normalize(q + q·A). Passage vectors are untouched, so an adapter is fitted,
swapped or switched off without re-embedding a collection. `fit` starts from A = 0 (the identity) and lowers a
softmax cross-entropy per labelled query: the best searched vector (a window, or the chunk's one vector) of a
relevant document against those of the dense retriever's first non-relevant chunks.

What an adapter learns is mostly *where a collection's questions go*: on SciFact, where most test claims cite an
abstract that some train claim cites, it lifts dense retrieval a lot; on HotpotQA, whose questions are about
paragraphs no training question touched, it does nothing (docs/benchmarks.md, issue 11). Fit it on labelled (or
logged and clicked) queries of the collection it will serve; it is off by default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from switchyard.errors import AdapterError
from switchyard.extras import needs_extra
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.store import ChunkFetch, IndexStore, VectorSearch

ADAPTER_FORMAT = 1


@dataclass
class AdapterExample:
    """One labelled query: its vector, every searched vector of its relevant documents, and one array of searched
    vectors per hard negative chunk."""

    query: np.ndarray
    positive: np.ndarray
    negatives: list[np.ndarray]


class QueryAdapter:
    """A fitted adapter file (`.npz`, written by `save`), applied to query vectors. Loaded once, then read-only:
    one instance serves every thread."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._loaded = Lazy(self._load)

    def _load(self) -> tuple[np.ndarray, dict]:
        if not self.path.is_file():
            raise AdapterError(f"query adapter {self.path} not found")
        try:
            with np.load(self.path, allow_pickle=False) as z:
                matrix = np.asarray(z["matrix"], dtype=np.float32)
                meta = json.loads(str(z["meta"]))
        except (OSError, KeyError, ValueError) as exc:
            raise AdapterError(f"{self.path} is not a query adapter file ({exc})") from None
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.isfinite(matrix).all():
            raise AdapterError(f"{self.path}: the adapter matrix must be square and finite, got {matrix.shape}")
        if meta.get("format") != ADAPTER_FORMAT:
            raise AdapterError(
                f"{self.path}: unknown adapter format {meta.get('format')!r} (expected {ADAPTER_FORMAT})"
            )
        matrix.setflags(write=False)
        return matrix, meta

    def warm_up(self) -> None:
        self._loaded.get()

    @property
    def matrix(self) -> np.ndarray:
        return self._loaded.get()[0]

    @property
    def meta(self) -> dict:
        return dict(self._loaded.get()[1])

    def check(self, model: str, dim: int) -> None:
        """Refuse an adapter fitted for another embedding model (its vectors live in another space)."""
        meta = self.meta
        if meta.get("model") != model or self.matrix.shape[0] != dim:
            raise AdapterError(
                f"query adapter {self.path} was fitted for {meta.get('model')!r} "
                f"({self.matrix.shape[0]}-dim vectors); this collection is embedded with {model!r} "
                f"({dim}-dim): fit an adapter for it or drop retrieve.retrievers.dense.query_adapter"
            )

    def run(self, vector: np.ndarray) -> np.ndarray:
        return apply_adapter(self.matrix, vector)

    @staticmethod
    def save(path: str | Path, matrix: np.ndarray, meta: dict) -> Path:
        path = check_adapter_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"format": ADAPTER_FORMAT, **meta}
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, matrix=np.asarray(matrix, dtype=np.float32), meta=np.asarray(json.dumps(meta)))
        tmp.replace(path)  # a crash mid-write never leaves a half-written adapter under the real name
        return path


def check_adapter_path(path: str | Path) -> Path:
    path = Path(path)
    if path.suffix != ".npz":
        raise AdapterError(f"an adapter file ends in .npz: {path}")
    return path


def apply_adapter(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """normalize(q + q·A) for one vector (d,) or a batch (n, d)."""
    q = np.asarray(vectors, dtype=np.float32)
    out = q + q @ matrix
    return out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)


def check_fit_settings(epochs: int, learning_rate: float, temperature: float, negatives: int = 1) -> None:
    if epochs < 1 or learning_rate <= 0 or temperature <= 0 or negatives < 1:
        raise AdapterError("need epochs >= 1, learning rate > 0, temperature > 0 and negatives >= 1")


def fit(
    examples: list[AdapterExample],
    epochs: int = 3,
    learning_rate: float = 1e-3,
    temperature: float = 0.05,
    seed: int = 0,
) -> np.ndarray:
    """The adapter matrix A (d x d) after `epochs` passes of Adam over the examples, one query per step, in an
    order drawn from `seed`. A chunk scores max over its vectors of cos(adapted q, v), as dense search does."""
    check_fit_settings(epochs, learning_rate, temperature)
    if not examples:
        raise AdapterError("no usable labelled queries (each needs a relevant document in the collection)")
    with needs_extra("torch", "fitting a query adapter"):
        import torch

    def tensor(a: np.ndarray):
        return torch.from_numpy(np.asarray(a, dtype=np.float32))

    dim = examples[0].query.shape[0]
    data = [(tensor(e.query), tensor(e.positive), [tensor(n) for n in e.negatives]) for e in examples if e.negatives]
    if not data:
        raise AdapterError("no labelled query has a non-relevant chunk to learn from")
    matrix = torch.zeros(dim, dim, requires_grad=True)
    optimizer = torch.optim.Adam([matrix], lr=learning_rate)
    target = torch.zeros(1, dtype=torch.long)
    for epoch in range(epochs):
        for i in np.random.default_rng(seed + epoch).permutation(len(data)):
            q, positive, negatives = data[i]
            adapted = q + q @ matrix
            adapted = adapted / adapted.norm()
            scores = [(positive @ adapted).max()] + [(n @ adapted).max() for n in negatives]
            logits = torch.stack(scores).view(1, -1) / temperature
            loss = torch.nn.functional.cross_entropy(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return matrix.detach().numpy().copy()


def collect_examples(
    store: IndexStore, query_vectors: dict[str, np.ndarray], qrels: dict[str, dict[str, float]], negatives: int = 30
) -> tuple[list[AdapterExample], int]:
    """Training examples for `fit` from labelled queries (query id -> vector, query id -> {doc_id: grade}); the hard
    negatives are the first `negatives` non-relevant chunks of an exact-as-configured dense search. Returns the
    examples and how many queries were skipped (no relevant document in the collection)."""
    if negatives < 1:
        raise AdapterError("need negatives >= 1")
    wanted: dict[str, tuple[list[str], list[str]]] = {}
    for qid, vector in query_vectors.items():
        relevant = [d for d, grade in qrels.get(qid, {}).items() if grade > 0]
        hits = VectorSearch(store).run(vector, negatives + 50)
        wanted[qid] = (relevant, [p.chunk_id for p in hits if p.doc_id not in relevant][:negatives])
    by_doc = ChunkFetch(store).dense_vectors(doc_ids=sorted({d for rel, _ in wanted.values() for d in rel}))
    by_chunk = ChunkFetch(store).dense_vectors(chunk_ids=sorted({c for _, neg in wanted.values() for c in neg}))
    doc_vectors: dict[str, list[np.ndarray]] = {}
    for doc_id, vectors in by_doc.values():
        doc_vectors.setdefault(doc_id, []).append(vectors)
    examples, skipped = [], 0
    for qid, (relevant, negative_ids) in wanted.items():
        positive = [v for d in relevant for v in doc_vectors.get(d, [])]
        if not positive:
            skipped += 1
            continue
        examples.append(
            AdapterExample(
                np.asarray(query_vectors[qid], dtype=np.float32),
                np.concatenate(positive),
                [by_chunk[c][1] for c in negative_ids if c in by_chunk],
            )
        )
    return examples, skipped
