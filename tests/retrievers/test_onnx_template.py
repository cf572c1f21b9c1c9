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
