"""The committed ONNX graphs of the shipped models (retrievers/onnx_template.py): filled with the installed weights
they are the torch export, byte for byte, and the compiled embedding backends run without PyTorch; a model folder
Switchyard does not ship still exports with torch, and without it the error names the `torch` extra."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from switchyard import MissingExtra
from switchyard.retrievers import onnx_template
from switchyard.retrievers.embedder import OnnxExport, resolve_model_dir
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def minilm():
    return resolve_model_dir("minilm")


def test_each_shipped_model_has_its_template(minilm):
    assert onnx_template.template_for(minilm) is not None
    assert all(p.stat().st_size < 512 * 1024 for p in onnx_template.TEMPLATE_DIR.glob("*.onnx"))  # graphs only


@pytest.mark.slow
def test_the_filled_template_is_the_torch_export_byte_for_byte(minilm, tmp_path):
    OnnxExport(minilm, tmp_path)._torch_export(tmp_path / "exported.onnx")
    onnx_template.fill(onnx_template.template_for(minilm), minilm, tmp_path / "filled.onnx")
    assert (tmp_path / "filled.onnx").read_bytes() == (tmp_path / "exported.onnx").read_bytes()


@pytest.mark.slow
def test_filling_needs_no_onnx_package_and_writes_what_onnx_would(minilm, tmp_path, monkeypatch):
    """fill edits the protobuf encoding itself; the onnx package (the torch extra) fills the same template to the
    same bytes."""
    import onnx

    template = onnx_template.template_for(minilm)
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if only the core were installed
    onnx_template.fill(template, minilm, tmp_path / "filled.onnx")
    monkeypatch.undo()
    model = onnx.load(str(template))
    mapping = json.loads({p.key: p.value for p in model.metadata_props}[onnx_template.WEIGHTS_KEY])
    tensors = load_file(str(minilm / "model.safetensors"))
    for init in model.graph.initializer:
        if init.name in mapping:
            key, transposed = mapping[init.name]
            init.raw_data = np.ascontiguousarray(tensors[key].T if transposed else tensors[key]).tobytes()
    del model.metadata_props[:]
    onnx.save(model, str(tmp_path / "by-onnx.onnx"))
    assert (tmp_path / "filled.onnx").read_bytes() == (tmp_path / "by-onnx.onnx").read_bytes()


def test_the_protobuf_fields_round_trip():
    varints = [0, 1, 127, 128, 300, 2**31, 2**40 + 5]
    assert [onnx_template._varint(onnx_template._encode_varint(v), 0)[0] for v in varints] == varints
    tensor = b"".join(
        [
            b"\x08\x02",  # dims: 2 (field 1, varint)
            b"\x10\x01",  # data_type: FLOAT (field 2)
            onnx_template._length_field(8, b"w"),  # name
            onnx_template._length_field(12, b"doc"),  # doc_string: after raw_data in field order
        ]
    )
    filled = onnx_template._with_raw_data(tensor, b"\x00" * 8)
    assert [n for n, _, _ in onnx_template._fields(filled)] == [1, 2, 8, 9, 12]
    assert onnx_template._tensor_name(filled) == "w"
    assert [p for n, _, p in onnx_template._fields(filled) if n == 9] == [b"\x00" * 8]


def test_other_weights_get_no_template_and_need_torch_to_export(minilm, tmp_path, monkeypatch):
    other = tmp_path / "other-model"
    shutil.copytree(minilm, other)
    weights = other / "model.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    weights.write_bytes(len(header).to_bytes(8, "little") + header + np.float32(1).tobytes())
    assert onnx_template.template_for(other) is None
    monkeypatch.setitem(sys.modules, "torch", None)  # as if the torch extra were not installed
    with pytest.raises(MissingExtra, match=r"an ONNX export of .*other-model needs torch.*'torch' extra"):
        OnnxExport(other, tmp_path / "cache").path()


@pytest.mark.slow
def test_the_compiled_backends_embed_without_pytorch(tmp_path, embedder):
    code = (
        "import sys, json; sys.modules.update(dict.fromkeys(['torch', 'transformers', 'sentence_transformers'])); "
        "from switchyard.retrievers.embedder import Embedder; "
        f"e = Embedder('minilm', backend='onnx', cache_dir={str(tmp_path)!r}); "
        "print(json.dumps(e.run(['What is standard gauge?']).tolist()))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    vector = np.array(json.loads(done.stdout)[0], dtype=np.float32)
    reference = embedder.run(["What is standard gauge?"])[0]  # sentence-transformers on torch
    assert float(vector @ reference) > 0.9999
