"""A cross-encoder as ONE `.onnx` file, run with ONNX Runtime and `tokenizers` (no PyTorch at run time).

The file format, `cross-encoder-onnx/1`:
- graph inputs `input_ids`, `attention_mask`, `token_type_ids` (int64, [batch, seq]); output `logits` (float32,
  [batch, 1]): the relevance score is `logits[:, 0]`, higher is more relevant (the raw logit, no sigmoid);
- `metadata_props`: `switchyard.format` = `cross-encoder-onnx/1`; `switchyard.tokenizer` = the whole
  `tokenizer.json` (Hugging Face `tokenizers`; its pair template makes `[CLS] query [SEP] passage [SEP]`);
  `switchyard.max_length` (tokens of one pair); `switchyard.base_model` (what the weights were initialised from);
  `switchyard.training` (a JSON summary: data, steps, seed).

`export_cross_encoder` writes such a file from a sentence-transformers `CrossEncoder` (needs the `torch` extra);
`OnnxCrossEncoder` reads it (needs only `onnxruntime`, the `onnx` extra, and `tokenizers`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from switchyard.errors import RerankerError
from switchyard.extras import needs_extra
from switchyard.retrievers.lazy import Lazy
from switchyard.retrievers.onnx_runtime import cpu_session

FORMAT = "cross-encoder-onnx/1"
META_FORMAT = "switchyard.format"
META_TOKENIZER = "switchyard.tokenizer"
META_MAX_LENGTH = "switchyard.max_length"
META_BASE_MODEL = "switchyard.base_model"
META_TRAINING = "switchyard.training"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "logits"
OPSET = 17
# Left in float32 by the int8 export: the classification head (pooler and classifier, tiny) whose output is the score.
FP32_NAME_PARTS = ("pooler", "classifier")


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- export (torch, at build time only) ---------------------------------------------------------------------------
def export_cross_encoder(
    model: Any,
    path: str | Path,
    *,
    max_length: int = 256,
    quantize: bool | Literal["weights", "dynamic"] = True,
    base_model: str = "",
    training: dict | None = None,
) -> str:
    """Write `model` (a sentence-transformers `CrossEncoder` with one output label, or the folder it was saved to)
    to `path` in the `cross-encoder-onnx/1` format and return the file's sha256.

    `quantize`: False keeps the whole graph in float32 (about 4 bytes per parameter). True or "weights" stores every
    weight matrix and embedding table as int8 with one float32 scale per output channel (per row of a table), each
    dequantised to float32 by the graph: a quarter of the size, computed in float32, scores within a few percent of
    the float32 file's spread. "dynamic": ONNX Runtime's dynamic quantisation (int8 weights and int8 activations at
    run time): the same size and about twice as fast on a CPU, but noisier (all-layer int8 moved a MiniLM
    cross-encoder's scores by about a fifth of their spread over a candidate list). The classification head stays
    float32 either way. The file is written atomically."""
    if max_length < 8:
        raise ValueError("max_length must be >= 8")
    mode = "weights" if quantize is True else quantize
    if mode not in (False, "weights", "dynamic"):
        raise ValueError(f"quantize must be True, False, 'weights' or 'dynamic', not {quantize!r}")
    with needs_extra("torch", "export_cross_encoder"):
        import torch
        from sentence_transformers import CrossEncoder
    from tokenizers import Tokenizer

    if isinstance(model, str | Path):
        model = CrossEncoder(str(model), device="cpu", local_files_only=True)
    hf = model.model
    if hf is None or int(getattr(hf.config, "num_labels", 0)) != 1:
        raise ValueError("export_cross_encoder needs a CrossEncoder with a sequence-classification head of 1 label")
    tokenizer = Tokenizer.from_str(model.tokenizer.backend_tokenizer.to_str())
    tokenizer.no_padding()
    tokenizer.no_truncation()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cross-encoder-export-", dir=target.parent) as work:
        fp32 = Path(work) / "fp32.onnx"
        _torch_export(torch, hf, fp32)
        graph = fp32
        if mode:
            graph = Path(work) / "int8.onnx"
            (_quantize_weights if mode == "weights" else _quantize_dynamic)(fp32, graph)
        meta = {
            META_FORMAT: FORMAT,
            META_TOKENIZER: tokenizer.to_str(),
            META_MAX_LENGTH: str(int(max_length)),
            META_BASE_MODEL: base_model,
            META_TRAINING: json.dumps({**(training or {}), "quantized": mode or False}, sort_keys=True),
        }
        final = Path(work) / "final.onnx"
        _with_metadata(graph, final, meta)
        os.replace(final, target)
    return file_sha256(target)


def _torch_export(torch: Any, hf: Any, out: Path) -> None:
    import copy
    import warnings

    hf = copy.deepcopy(hf).to("cpu").eval()
    with contextlib.suppress(Exception):  # eager attention traces to plain ops; sdpa may not on every version
        hf.set_attn_implementation("eager")

    class Logits(torch.nn.Module):  # keyword call: the model rejects positional masks
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    # a padded row and a second segment in the example: neither the mask nor the segment ids may be traced away
    ids = torch.full((2, 16), 1000, dtype=torch.long)
    mask = torch.ones((2, 16), dtype=torch.long)
    types = torch.zeros((2, 16), dtype=torch.long)
    types[:, 6:] = 1
    ids[1, 10:] = 0
    mask[1, 10:] = 0
    types[1, 10:] = 0
    axes = {name: {0: "batch", 1: "seq"} for name in INPUTS}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Logits(hf),
            (ids, mask, types),
            str(out),
            input_names=list(INPUTS),
            output_names=[OUTPUT],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes={**axes, OUTPUT: {0: "batch"}},
        )


def _quantize_weights(fp32: Path, out: Path) -> None:
    """Weight-only int8: each MatMul weight (per output column) and embedding table (per row) becomes int8 + float32
    scales behind a DequantizeLinear; activations stay float32. Small tensors and the head are left as they are."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(fp32))
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    replaced: dict[str, str] = {}
    dequantize = []
    for node in graph.node:
        if node.op_type not in ("MatMul", "Gather") or any(p in node.name.lower() for p in FP32_NAME_PARTS):
            continue
        slot = 1 if node.op_type == "MatMul" else 0
        name = node.input[slot]
        if name not in replaced:
            if name not in initializers:
                continue
            weight = numpy_helper.to_array(initializers[name])
            if weight.ndim != 2 or weight.size < 4096 or weight.dtype != np.float32:
                continue
            axis = 1 if node.op_type == "MatMul" else 0  # per output column of a matrix, per row of a table
            peak = np.abs(weight).max(axis=1 - axis)
            scale = (np.where(peak > 0, peak, 1.0) / 127.0).astype(np.float32)
            q = np.clip(np.round(weight / np.expand_dims(scale, 1 - axis)), -127, 127).astype(np.int8)
            graph.initializer.extend(
                [
                    numpy_helper.from_array(q, f"{name}_int8"),
                    numpy_helper.from_array(scale, f"{name}_scale"),
                    numpy_helper.from_array(np.zeros_like(q, shape=scale.shape), f"{name}_zero"),
                ]
            )
            dequantize.append(
                helper.make_node(
                    "DequantizeLinear",
                    [f"{name}_int8", f"{name}_scale", f"{name}_zero"],
                    [f"{name}_dequantized"],
                    axis=axis,
                    name=f"{name}_DequantizeLinear",
                )
            )
            replaced[name] = f"{name}_dequantized"
        node.input[slot] = replaced[name]
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name not in replaced or i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = dequantize + list(graph.node)  # their inputs are initializers: first is a topological order
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(out))


def _quantize_dynamic(fp32: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32), load_external_data=False).graph
    keep = [n.name for n in graph.node if any(part in n.name.lower() for part in FP32_NAME_PARTS)]
    # quantize_dynamic calls logging.warning() ("consider pre-processing"; ORT's pre-processing fails on this graph),
    # which would install a handler on an unconfigured root logger: a NullHandler stands in while it runs
    root = logging.getLogger()
    stand_in = logging.NullHandler() if not root.handlers else None
    if stand_in is not None:
        root.addHandler(stand_in)
    try:
        quantize_dynamic(
            str(fp32),
            str(out),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gather"],  # every weight matrix and the embedding tables
            nodes_to_exclude=keep,
            per_channel=True,
            # 7-bit weights: x86 CPUs without VNNI multiply u8 x s8 pairs into saturating int16 sums, which scrambled
            # the order of a small model's scores; the file must rank the same on whichever CPU reads it
            reduce_range=True,
        )
    finally:
        if stand_in is not None:
            root.removeHandler(stand_in)


def _with_metadata(graph: Path, out: Path, meta: dict[str, str]) -> None:
    import onnx

    model = onnx.load(str(graph))
    kept = [p for p in model.metadata_props if p.key not in meta]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(out))


# -- run time (onnxruntime + tokenizers) -------------------------------------------------------------------------
class _Loaded:
    def __init__(self, session: Any, feeds: list[str], pair: Any, fallback: Any, pad_id: int, meta: dict[str, str]):
        self.session = session
        self.feeds = feeds  # the graph's inputs
        self.pair = pair  # truncates the passage
        self.fallback = fallback  # truncates the longer of the two (a query too long for `pair`)
        self.pad_id = pad_id
        self.meta = meta


class OnnxCrossEncoder:
    """Scores (query, passage) pairs with a `cross-encoder-onnx/1` file.

    `__init__` is cheap and validates its arguments; the file is checked (it exists, its sha256 equals `sha256`
    when one is given, it is this format) and loaded on first use or in `warm_up()`, once. `predict(pairs)` returns
    one float32 logit per pair, higher = more relevant. Pairs are tokenised with the file's own tokenizer, truncated
    to its `max_length` by cutting the passage (a query too long to leave room for any passage is cut too), sorted
    by length and padded per batch of `batch_size`. `threads`: ONNX Runtime intra-op threads (None: one per core).

    Safe to share between threads without a lock: the tokenizers are configured once at load and only read
    afterwards, and ONNX Runtime's `InferenceSession.run` may be called concurrently."""

    def __init__(
        self,
        path: str | Path,
        sha256: str | None = None,
        batch_size: int = 32,
        threads: int | None = None,
    ):
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if threads is not None and threads < 1:
            raise ValueError("threads must be >= 1")
        if sha256 is not None and (len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256.lower())):
            raise ValueError(f"sha256 must be 64 hex digits, not {sha256!r}")
        self.path = Path(path).expanduser()
        self.sha256 = sha256.lower() if sha256 else None
        self.batch_size = batch_size
        self.threads = threads
        self._loaded = Lazy(self._load)

    def warm_up(self) -> None:
        self._loaded.get()

    @property
    def metadata(self) -> dict[str, str]:
        """The file's `switchyard.*` metadata (loading it)."""
        return dict(self._loaded.get().meta)

    @property
    def max_length(self) -> int:
        return int(self._loaded.get().meta[META_MAX_LENGTH])

    def _load(self) -> _Loaded:
        if not self.path.is_file():
            raise RerankerError(f"cross-encoder file {self.path} does not exist")
        if self.sha256 is not None:
            actual = file_sha256(self.path)
            if actual != self.sha256:
                raise RerankerError(
                    f"cross-encoder file {self.path} has sha256 {actual}, expected {self.sha256}: "
                    "the file is damaged or not the model it should be"
                )
        with needs_extra("onnx", "a cross-encoder ONNX file (rerank.method: cross_encoder)"):
            import onnxruntime  # noqa: F401
        from tokenizers import Tokenizer

        not_format = f"{self.path} is not a Switchyard cross-encoder file ({FORMAT}; see export_cross_encoder)"
        try:
            session = cpu_session(self.path, self.threads)
        except Exception as exc:
            raise RerankerError(f"{not_format}: ONNX Runtime cannot load it ({type(exc).__name__})") from None
        meta = dict(session.get_modelmeta().custom_metadata_map)
        if meta.get(META_FORMAT) != FORMAT:
            found = meta.get(META_FORMAT)
            raise RerankerError(f"{not_format}: its {META_FORMAT} is {found!r}" if found else f"{not_format}")
        inputs = [i.name for i in session.get_inputs()]
        outputs = [o.name for o in session.get_outputs()]
        if (
            not {"input_ids", "attention_mask"} <= set(inputs)
            or not set(inputs) <= set(INPUTS)
            or OUTPUT not in outputs
        ):
            raise RerankerError(f"{not_format}: inputs {inputs}, outputs {outputs}")
        try:
            max_length = int(meta[META_MAX_LENGTH])
            pair = Tokenizer.from_str(meta[META_TOKENIZER])
            fallback = Tokenizer.from_str(meta[META_TOKENIZER])
        except Exception as exc:
            raise RerankerError(f"{not_format}: bad tokenizer or max_length ({type(exc).__name__}: {exc})") from None
        for tok in (pair, fallback):
            tok.no_padding()
        pair.enable_truncation(max_length, strategy="only_second")
        fallback.enable_truncation(max_length, strategy="longest_first")
        pad_id = pair.token_to_id("[PAD]")
        return _Loaded(session, inputs, pair, fallback, 0 if pad_id is None else pad_id, meta)

    def _encode(self, loaded: _Loaded, pairs: list[tuple[str, str]]) -> list[Any]:
        try:
            return loaded.pair.encode_batch(pairs)
        except Exception:  # a query that leaves no room for the passage: cut both, for those pairs only
            out = []
            for pair in pairs:
                try:
                    out.append(loaded.pair.encode(*pair))
                except Exception:
                    out.append(loaded.fallback.encode(*pair))
            return out

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One score per (query, passage) pair, in order."""
        loaded = self._loaded.get()
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        encodings = self._encode(loaded, [(str(q), str(p)) for q, p in pairs])
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))  # little padding per batch
        scores = np.empty(len(encodings), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = [encodings[i] for i in rows]
            width = max(len(e.ids) for e in batch)
            arrays = {
                "input_ids": np.full((len(batch), width), loaded.pad_id, dtype=np.int64),
                "attention_mask": np.zeros((len(batch), width), dtype=np.int64),
                "token_type_ids": np.zeros((len(batch), width), dtype=np.int64),
            }
            for r, e in enumerate(batch):
                n = len(e.ids)
                arrays["input_ids"][r, :n] = e.ids
                arrays["attention_mask"][r, :n] = 1
                arrays["token_type_ids"][r, :n] = e.type_ids
            logits = loaded.session.run([OUTPUT], {name: arrays[name] for name in loaded.feeds})[0]
            scores[rows] = np.asarray(logits, dtype=np.float32).reshape(len(batch), -1)[:, 0]
        return scores


def is_onnx_file(name: str) -> bool:
    """Whether `rerank.model` names an ONNX file (by its suffix) rather than a CrossEncoder folder or hub id."""
    return name.lower().endswith(".onnx")
