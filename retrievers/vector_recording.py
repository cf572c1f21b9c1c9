"""Recorded embedding vectors, so a run replays with the vectors it was recorded with on any machine.

Why: the same model computes slightly different vectors on different runtimes (OpenVINO's `precision: auto` is bf16
on a CPU with native bf16 and f32 elsewhere; cosine >= 0.9999 between them). That is enough to swap near-tied
passages, and a different passage order is a different prompt, which a reply cache (llm/cache.py) has not
recorded. Recording every vector a run computes (the passages at ingest, the questions, the sentences the graph's
checks score) and replaying them makes the index, the retrieval and the checks those of the recorded run.

A recording is a folder of files per model, each holding `keys` (the sha256 of the model name and the text, 32
bytes a row), `vectors` (float32) and `runtime` ({model, backend, precision, dim} as JSON):
- `DIR/<model>-<time>-<random>.vlog`, the log a live recording appends to: one line of its runtime as JSON, then
  records of the 32-byte key and the float32 vector. Each recording (a process's embedder) has its own log, so
  concurrent processes never write one file; threads share the recording and its lock. Vectors are buffered in
  memory and appended when `flush_every` are pending and on `flush()`, which `switchyard eval` calls before it writes
  each row, so a row on disk never outlives its vectors, even under kill -9. A record torn by a death mid-write is
  ignored when read (its vector is computed and recorded again). Older runs hold the same as whole segments,
  `DIR/<model>-<time>-<random>.npz`, which still load.
- `DIR/<model>.npz`, the packed file: every segment of a finished run merged, sorted by key (`bench/pack_run.py`),
  so a run kept in git holds one vector file per model. It loads first, then the segments in name order (which
  starts with the time).
Two processes recording into one folder at once may both record a text neither found there; both vectors come from
the folder's one runtime, and loading keeps the one in the later segment.

`RecordingEmbedder` wraps an `Embedder` with a recording, as `CachingBackend` (llm/cache.py) wraps a chat backend;
`build_embedder` builds one or the other from the configuration's settings.

One recording holds one runtime per model: recording into a folder whose vectors of that model came from another
backend or precision is refused, since the folder would then replay a mix.

Runs over one corpus share its vectors instead of each holding a copy: `DIR/bases.txt` names folders (one a line,
relative to DIR; `#` starts a comment) whose recordings DIR extends. Theirs load first, read-only and in one runtime
with DIR's, so DIR records only what they lack, and packing DIR drops what they hold (`entries(bases=False)`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from switchyard.configs.schema import EmbeddingBackend, EmbeddingPrecision
from switchyard.errors import EmbedderError, VectorCacheMiss
from switchyard.retrievers.embedder import Embedder, QueryVectorCache, TextEmbedder
from switchyard.retrievers.lazy import Lazy


def vector_key(model: str, text: str) -> bytes:
    return hashlib.sha256(f"{model}\n{text}".encode()).digest()


def _first_words(text: str, n: int = 10) -> str:
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


BASES = "bases.txt"
LOG_SUFFIX = ".vlog"


def _segment_prefix(model: str) -> str:
    """File names start with the model's name, made safe for any file system."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(model).name) or "model"


class VectorRecording:
    """The vectors of `model` recorded under `root`. `replay`: answer only from the recording (`lookup` never
    returns a gap; an unrecorded text is a `VectorCacheMiss`). Thread-safe."""

    def __init__(self, root: str | Path, model: str, replay: bool = False, flush_every: int = 4096):
        if flush_every < 1:
            raise ValueError("flush_every must be >= 1")
        self.root = Path(root).expanduser()
        self.model = model
        self.replay = replay
        self.flush_every = flush_every
        self.replayed = 0  # vectors answered from the recording
        self.recorded = 0  # vectors computed and recorded
        self._lock = threading.Lock()
        self._vectors: dict[bytes, np.ndarray] | None = None  # loaded on first use
        self._runtime: dict | None = None
        self._pending: list[tuple[bytes, np.ndarray]] = []
        self._log: Path | None = None  # this recording's log, created at its first write

    # -- reading --------------------------------------------------------------------------------------------
    @property
    def packed_path(self) -> Path:
        return self.root / f"{_segment_prefix(self.model)}.npz"

    def segments(self) -> list[Path]:
        """The segment files of this model's name, in the order they load."""
        return self._segments(self.root)

    def _segments(self, root: Path) -> list[Path]:
        if not root.is_dir():
            return []
        prefix = _segment_prefix(self.model)
        return sorted([*root.glob(f"{prefix}-*.npz"), *root.glob(f"{prefix}-*{LOG_SUFFIX}")], key=lambda p: p.stem)

    def _own_files(self, root: Path) -> list[Path]:
        packed = root / self.packed_path.name
        return [packed] * packed.is_file() + self._segments(root)

    def _base_files(self, root: Path, seen: tuple[Path, ...] = ()) -> list[Path]:
        """The files of the recordings `root` extends (ROOT/bases.txt, theirs before their own), in load order."""
        here = root.resolve()
        if here in seen:
            raise EmbedderError(f"{seen[-1] / BASES} leads back to {here}: bases cannot extend each other in a circle")
        listing = root / BASES
        if not listing.is_file():
            return []
        files = []
        for line in listing.read_text(encoding="utf-8").splitlines():
            name = line.split("#", 1)[0].strip()
            if not name:
                continue
            base = root / name
            if not base.is_dir():
                raise EmbedderError(f"{listing}: {name}: no such folder of recorded vectors")
            files += self._base_files(base, (*seen, here)) + self._own_files(base)
        return files

    def _read(self, paths: list[Path]) -> dict[bytes, np.ndarray]:
        """The vectors of this model in `paths`, later files winning (call under the lock)."""
        vectors: dict[bytes, np.ndarray] = {}
        for path in paths:
            try:
                if path.suffix == LOG_SUFFIX:
                    runtime, keys, values = _read_log(path)
                else:
                    with np.load(path, allow_pickle=False) as data:
                        runtime = json.loads(str(data["runtime"]))
                        keys, values = data["keys"], data["vectors"]
            except (OSError, ValueError, KeyError) as exc:
                raise EmbedderError(
                    f"{path} is not a vector recording segment ({type(exc).__name__}: {exc}); "
                    "delete it to record its vectors again"
                ) from None
            if runtime is None:
                continue  # a log whose first write was cut short holds nothing
            if runtime.get("model") != self.model:
                continue  # another model whose name makes the same file prefix
            self._check_runtime(runtime, path)
            for key, vector in zip(keys, values.astype(np.float32, copy=False)):
                vector.setflags(write=False)
                vectors[key.tobytes()] = vector
        return vectors

    def _load(self) -> dict[bytes, np.ndarray]:
        """Every vector of this model: its bases', then the packed file, then the segments (call under the lock)."""
        if self._vectors is None:
            self._vectors = self._read(self._base_files(self.root) + self._own_files(self.root))
        return self._vectors

    def entries(self, bases: bool = True) -> tuple[dict | None, dict[bytes, np.ndarray]]:
        """(runtime, every recorded vector by key), read afresh from disk; `bases=False`: only the vectors this
        folder holds that its bases do not (what bench/pack_run.py packs)."""
        with self._lock:
            self._vectors, self._runtime = None, None
            vectors = self._load()
            if not bases:
                held = self._read(self._base_files(self.root)).keys()
                vectors = {k: v for k, v in self._read(self._own_files(self.root)).items() if k not in held}
            self._vectors = None
            return (dict(self._runtime) if self._runtime else None), dict(vectors)

    def check_runtime(self, runtime: dict) -> None:
        """Refuse to record vectors computed by `runtime` ({backend, precision, dim}) into a folder whose vectors of
        this model came from another one."""
        with self._lock:
            self._load()
            self._check_runtime(runtime, None)

    def _check_runtime(self, runtime: dict, where: Path | None) -> None:
        """`where`: the segment `runtime` comes from; None: the runtime computing this run's vectors."""
        recorded = {k: runtime.get(k) for k in ("backend", "precision", "dim")}
        if self._runtime is None:
            self._runtime = recorded
        elif recorded != self._runtime:
            held = f"{self.root} holds {self.model} vectors computed by {_describe(self._runtime)}"
            if where is None:
                raise EmbedderError(
                    f"{held}, but this machine computes them by {_describe(recorded)}: replay them "
                    "(eval --replay) or record into another folder; one recording holds one runtime"
                )
            raise EmbedderError(
                f"{held}, but {where.name} holds some computed by {_describe(recorded)}: one "
                "recording holds one runtime; move that segment to another folder"
            )

    def runtime(self) -> dict | None:
        """{backend, precision, dim} the recorded vectors of this model were computed with (None: none recorded)."""
        with self._lock:
            self._load()
            return dict(self._runtime) if self._runtime else None

    def lookup(self, texts: list[str]) -> list[np.ndarray | None]:
        """The recorded vector of each text, None where there is none (under `replay`, a miss raises)."""
        keys = [vector_key(self.model, t) for t in texts]
        with self._lock:
            vectors = self._load()
            found = [vectors.get(k) for k in keys]
            self.replayed += sum(v is not None for v in found)
        if self.replay:
            missing = [t for t, v in zip(texts, found) if v is None]
            if missing:
                where = self.root if self.root.is_dir() else f"{self.root} (no such folder)"
                where = f"{where} (or its bases)" if (self.root / BASES).is_file() else where
                raise VectorCacheMiss(
                    f"{len(missing)} of {len(texts)} text(s) have no recorded {self.model} vector in {where} (first: "
                    f"{_first_words(missing[0])!r}); record them first (eval --vector-cache DIR without --replay)"
                )
        return found

    # -- recording ------------------------------------------------------------------------------------------
    def add(self, texts: list[str], vectors: np.ndarray, runtime: dict) -> None:
        """Record `vectors` of `texts`, computed by `runtime` ({backend, precision}); refused when the folder's
        vectors of this model came from another runtime."""
        if self.replay:
            raise EmbedderError("a replayed recording records nothing")
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        if not len(texts):
            return
        entry = {
            "model": self.model,
            "backend": runtime["backend"],
            "precision": runtime["precision"],
            "dim": int(vectors.shape[1]),
        }
        with self._lock:
            stored = self._load()
            self._check_runtime(entry, None)
            for text, vector in zip(texts, np.asarray(vectors, dtype=np.float32)):
                key = vector_key(self.model, text)
                if key in stored:
                    continue
                vector = vector.copy()
                vector.setflags(write=False)
                stored[key] = vector
                self._pending.append((key, vector))
                self.recorded += 1
            if len(self._pending) >= self.flush_every:
                self._write_pending()

    def flush(self) -> None:
        """Append the vectors recorded since the last write to this recording's log."""
        with self._lock:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        header = b""
        if self._log is None:
            self.root.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            self._log = self.root / f"{_segment_prefix(self.model)}-{stamp}-{uuid.uuid4().hex[:12]}{LOG_SUFFIX}"
            runtime = {"model": self.model, **(self._runtime or {})}
            header = json.dumps(runtime, sort_keys=True).encode() + b"\n"
        records = b"".join(key + np.asarray(vector, dtype="<f4").tobytes() for key, vector in self._pending)
        with open(self._log, "ab") as log:  # one write: a death mid-write tears at most the last record
            log.write(header + records)
        self._pending = []


def recorded_models(folder: Path) -> list[str]:
    """The models with vectors recorded in `folder` itself (packed files, segments, logs; not its bases)."""
    models = set()
    for path in folder.glob("*.npz"):
        with np.load(path, allow_pickle=False) as data:
            models.add(json.loads(str(data["runtime"]))["model"])
    for path in folder.glob(f"*{LOG_SUFFIX}"):
        with open(path, "rb") as log:
            runtime = _log_runtime(log.readline())
        if runtime is not None:
            models.add(runtime["model"])
    return sorted(models)


def _log_runtime(header: bytes) -> dict | None:
    """The runtime a log's first line names; None when the line is torn (the log's first write was cut short, so it
    holds nothing)."""
    return json.loads(header) if header.endswith(b"\n") else None


def _read_log(path: Path) -> tuple[dict | None, np.ndarray, np.ndarray]:
    """(runtime, keys, vectors) of a recording's log; a torn last record is left out, and a log whose header is
    torn holds nothing (runtime None)."""
    data = path.read_bytes()
    end = data.find(b"\n") + 1
    runtime = _log_runtime(data[:end])
    if runtime is None:
        return None, np.empty((0, 32), np.uint8), np.empty((0, 0), np.float32)
    dim = int(runtime["dim"])
    body = np.frombuffer(data, dtype=np.uint8, offset=end)
    size = 32 + 4 * dim
    rows = body[: len(body) // size * size].reshape(-1, size)
    return runtime, rows[:, :32], rows[:, 32:].copy().view("<f4").reshape(-1, dim)


def _write_npz(path: Path, keys: np.ndarray, vectors: np.ndarray, runtime: dict) -> None:
    """A segment or packed file, written whole to a temporary file renamed into place."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, keys=keys, vectors=vectors, runtime=np.array(json.dumps(runtime, sort_keys=True)))
    with tempfile.NamedTemporaryFile(
        "wb", dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp", delete=False
    ) as tmp:
        tmp.write(buffer.getvalue())
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, path)


def write_packed_vectors(path: Path, runtime: dict, vectors: dict[bytes, np.ndarray]) -> None:
    """The packed file of one model (bench/pack_run.py): its vectors sorted by key."""
    order = sorted(vectors)
    keys = np.frombuffer(b"".join(order), dtype=np.uint8).reshape(-1, 32)
    values = np.stack([vectors[k] for k in order]).astype(np.float32)
    _write_npz(path, keys, values, runtime)


def _describe(runtime: dict) -> str:
    return f"{runtime.get('backend')} in {runtime.get('precision')} (dim {runtime.get('dim')})"


class RecordingEmbedder(QueryVectorCache):
    """An `Embedder` with a vector recording, as `CachingBackend` is a chat backend with a reply store: every vector
    `inner` computes is recorded, texts recorded before are answered from the recording; when the recording replays,
    only from it: nothing is computed or loaded, and `runtime` and `dim` are the recording's. Thread-safe."""

    def __init__(self, inner: Embedder, recording: VectorRecording):
        super().__init__()
        self.inner = inner
        self.recording = recording
        self.model_name = inner.model_name
        self.model_dir = inner.model_dir
        self.batch_size = inner.batch_size
        self._recording_checked = Lazy(self._check_recording)

    def __getattr__(self, name: str):  # the inner embedder's settings (backend, device, threads, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def replay(self) -> bool:
        return self.recording.replay

    def _check_recording(self) -> bool:
        """A recording folder takes vectors of one runtime: this one's, unless replaying."""
        if not self.replay:
            self.recording.check_runtime(self._live_runtime())
        return True

    def _live_runtime(self) -> dict:
        return {**self.inner.runtime, "dim": self.inner.dim}

    def _replayed_runtime(self) -> dict:
        recorded = self.recording.runtime()
        if recorded is None:
            raise EmbedderError(f"no {self.model_name} vectors are recorded in {self.recording.root} to replay")
        return recorded

    def warm_up(self) -> None:
        if not self.replay:  # a replay loads no model
            self.inner.warm_up()

    @property
    def dim(self) -> int:
        return self._replayed_runtime()["dim"] if self.replay else self.inner.dim

    @property
    def inference_precision(self) -> str:
        return self._replayed_runtime()["precision"] if self.replay else self.inner.inference_precision

    @property
    def runtime(self) -> dict:
        """{backend, precision} the vectors come from: this machine's runtime (loading it), or when replaying, the
        runtime that recorded them (nothing is loaded)."""
        if self.replay:
            recorded = self._replayed_runtime()
            return {"backend": recorded["backend"], "precision": recorded["precision"]}
        self._recording_checked.get()  # refused here, before any question, when it differs from the recording
        return self.inner.runtime

    @property
    def tokenizer_file(self) -> str:
        return self.inner.tokenizer_file

    def run(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._recording_checked.get()
        found = self.recording.lookup(list(texts))  # under replay, every text is found or this raises
        missing = [i for i, vector in enumerate(found) if vector is None]
        if missing:
            computed = self.inner.run([texts[i] for i in missing])
            self.recording.add([texts[i] for i in missing], computed, self._live_runtime())
            for i, vector in zip(missing, computed):
                found[i] = vector
        vectors = [vector for vector in found if vector is not None]
        assert len(vectors) == len(found)  # every text is found or computed above
        return np.stack(vectors).astype(np.float32, copy=False)


def build_embedder(
    model: str = "minilm",
    batch_size: int = 32,
    device: str = "cpu",
    backend: EmbeddingBackend = "torch",
    threads: int | None = None,
    cache_dir: str | None = None,
    precision: EmbeddingPrecision = "auto",
    vector_cache: str | None = None,
    replay: bool = False,
) -> TextEmbedder:
    """The embedder an `embedding` config section describes (`build_embedder(**section.model_dump())`): the model,
    wrapped in a `RecordingEmbedder` when `vector_cache` names a recording (`replay`: answered only from it). Building
    loads nothing: the model loads on first use, and never under replay."""
    if replay and not vector_cache:
        raise ValueError("replay needs vector_cache (the folder of recorded vectors)")
    inner = Embedder(
        model,
        batch_size=batch_size,
        device=device,
        backend=backend,
        threads=threads,
        cache_dir=cache_dir,
        precision=precision,
    )
    if not vector_cache:
        return inner
    return RecordingEmbedder(inner, VectorRecording(vector_cache, model, replay=replay))
