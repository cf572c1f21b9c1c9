"""ONNX graphs of the packaged embedding models without PyTorch: a committed graph template filled with the weights
of the installed model package.

The compiled embedding backends (ONNX Runtime, OpenVINO) run an ONNX file of the model's transformer. Exporting one
needs PyTorch (`torch.onnx.export`, the `torch` extra); for the models Switchyard ships, the export's graph is
committed instead, with every weight tensor emptied and named after the `model.safetensors` tensor it holds (or its
transpose: a linear layer's weight is stored transposed for MatMul). `fill` puts the weights back, in place, and
the result is the export itself, byte for byte (tests/retrievers/test_onnx_template.py compares them), so vectors
do not change with the way the file was made. Filling needs no `onnx` package (it edits the protobuf encoding);
making a template does (the `torch` extra).

    .venv/bin/python -m switchyard.retrievers.onnx_template EXPORT.onnx MODEL_DIR OUT.onnx   # make a template
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

TEMPLATE_DIR = Path(__file__).resolve().parent / "onnx_templates"
WEIGHTS_KEY = "switchyard.weights"  # metadata: {initializer name: [safetensors key, transposed]}
SOURCE_KEY = "switchyard.weights_sha256"  # metadata: sha256 of the model.safetensors the template was made from


def template_for(model_dir: Path) -> Path | None:
    """The committed template made from exactly this folder's weights, if there is one."""
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        return None
    digest = file_sha256(weights)
    for path in sorted(TEMPLATE_DIR.glob("*.onnx")):
        if path.stem == digest[:16]:
            return path
    return None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make(export: Path, model_dir: Path, out: Path) -> None:
    """A template from a torch export of `model_dir`: each initializer that equals a safetensors tensor (or its
    transpose) is emptied and mapped to it; anything else stays in the graph as it is."""
    import onnx
    from onnx import numpy_helper
    from safetensors.numpy import load_file

    model = onnx.load(str(export))
    tensors = load_file(str(model_dir / "model.safetensors"))
    mapping: dict[str, list] = {}
    for init in model.graph.initializer:
        value = numpy_helper.to_array(init)
        for key, tensor in tensors.items():
            if tensor.shape == value.shape and np.array_equal(tensor, value):
                mapping[init.name] = [key, False]
            elif tensor.ndim == 2 and tensor.T.shape == value.shape and np.array_equal(tensor.T, value):
                mapping[init.name] = [key, True]
            else:
                continue
            init.ClearField("raw_data")
            break
    entry = model.metadata_props.add()
    entry.key, entry.value = WEIGHTS_KEY, json.dumps(mapping, sort_keys=True)
    entry = model.metadata_props.add()
    entry.key, entry.value = SOURCE_KEY, file_sha256(model_dir / "model.safetensors")
    onnx.save(model, str(out))


def fill(template: Path, model_dir: Path, target: Path) -> None:
    """Write the ONNX file of `model_dir`'s transformer to `target`: the template with the weights put back.

    Works on the protobuf encoding itself (no `onnx` package, 31 MB the core does without): each mapped initializer
    gets its `raw_data` field where protobuf's own serializer puts it (field order), the graph's and the model's
    lengths follow, and the template's metadata goes, so the bytes are what `onnx.save` writes (tested)."""
    from safetensors.numpy import load_file

    model = template.read_bytes()
    meta = dict(_string_pair(payload) for number, _, payload in _fields(model) if number == MODEL_METADATA)
    mapping = json.loads(meta[WEIGHTS_KEY])
    tensors = load_file(str(model_dir / "model.safetensors"))

    def weights(name: str) -> bytes:
        key, transposed = mapping[name]
        return np.ascontiguousarray(tensors[key].T if transposed else tensors[key]).tobytes()

    with target.open("wb") as out:  # piece by piece: the weights are never copied into one whole-model buffer
        for number, encoded, payload in _fields(model):
            if number == MODEL_GRAPH:
                graph = []
                for field, whole, tensor in _fields(payload):
                    name = _tensor_name(tensor) if field == GRAPH_INITIALIZER else ""
                    graph.append(
                        _length_field(field, _with_raw_data(tensor, weights(name))) if name in mapping else whole
                    )
                out.write(_length_header(MODEL_GRAPH, sum(map(len, graph))))
                out.writelines(graph)
            elif number != MODEL_METADATA:
                out.write(encoded)


# -- the few protobuf rules fill needs (https://protobuf.dev/programming-guides/encoding/) --------------------------
MODEL_GRAPH, MODEL_METADATA = 7, 14  # onnx.proto: ModelProto.graph, ModelProto.metadata_props
GRAPH_INITIALIZER = 5  # GraphProto.initializer
TENSOR_NAME, TENSOR_RAW_DATA = 8, 9  # TensorProto.name, TensorProto.raw_data


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value, pos


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _fields(buf: bytes):
    """(field number, the field's whole encoding, its payload for length-delimited fields else b"") of each
    top-level field of one protobuf message."""
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = _varint(buf, pos)
        wire, payload = tag & 7, b""
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            payload, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield tag >> 3, buf[start:pos], payload


def _length_header(number: int, size: int) -> bytes:
    """The tag and length that precede a length-delimited field's `size` bytes."""
    return _encode_varint(number << 3 | 2) + _encode_varint(size)


def _length_field(number: int, payload: bytes) -> bytes:
    return _length_header(number, len(payload)) + payload


def _string_pair(entry: bytes) -> tuple[str, str]:
    """A StringStringEntryProto's (key, value)."""
    found = {number: payload.decode() for number, _, payload in _fields(entry)}
    return found.get(1, ""), found.get(2, "")


def _tensor_name(tensor: bytes) -> str:
    return next((p.decode() for n, _, p in _fields(tensor) if n == TENSOR_NAME), "")


def _with_raw_data(tensor: bytes, data: bytes) -> bytes:
    """The tensor's fields with `raw_data` set, in field-number order as protobuf serializes them."""
    fields = [(n, whole) for n, whole, _ in _fields(tensor) if n != TENSOR_RAW_DATA]
    at = next((i for i, (n, _) in enumerate(fields) if n > TENSOR_RAW_DATA), len(fields))
    fields.insert(at, (TENSOR_RAW_DATA, _length_field(TENSOR_RAW_DATA, data)))
    return b"".join(whole for _, whole in fields)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    export_path, folder, out_path = map(Path, sys.argv[1:])
    make(export_path, folder, out_path)
    print(f"{out_path}: {out_path.stat().st_size} bytes")
