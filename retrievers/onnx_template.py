"""ONNX graphs of the packaged embedding models without PyTorch: a committed graph template filled with the weights
of the installed model package.

The compiled embedding backends (ONNX Runtime, OpenVINO) run an ONNX file of the model's transformer. Exporting one
needs PyTorch (`torch.onnx.export`, the `torch` extra); for the models Switchyard ships, the export's graph is
committed instead, with every weight tensor emptied and named after the `model.safetensors` tensor it holds (or its
transpose: a linear layer's weight is stored transposed for MatMul). `fill` puts the weights back, in place, and
the result is the export itself, byte for byte (tests/retrievers/test_onnx_template.py compares them), so vectors
do not change with the way the file was made.

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
    """Write the ONNX file of `model_dir`'s transformer to `target`: the template with the weights put back."""
    import onnx
    from safetensors.numpy import load_file

    model = onnx.load(str(template))
    meta = {p.key: p.value for p in model.metadata_props}
    mapping = json.loads(meta[WEIGHTS_KEY])
    tensors = load_file(str(model_dir / "model.safetensors"))
    for init in model.graph.initializer:
        if init.name in mapping:
            key, transposed = mapping[init.name]
            value = tensors[key].T if transposed else tensors[key]
            init.raw_data = np.ascontiguousarray(value).tobytes()
    del model.metadata_props[:]  # the export has none: the filled file is the export, byte for byte
    onnx.save(model, str(target))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    export_path, folder, out_path = map(Path, sys.argv[1:])
    make(export_path, folder, out_path)
    print(f"{out_path}: {out_path.stat().st_size} bytes")
