"""Switchyard installs into anyone's environment: the wheel built from this repository holds one top-level name,
`switchyard`, and installs (with the `local` extra) into a fresh virtual environment beside PyPI's `llm` and a host
service that owns the generic names `configs`, `service`, `errors`, `nodes`, … (tests/fixtures/host_service). Both
import, and `switchyard ask` answers over the sample corpus there, with no PyTorch installed. Offline: everything comes from the wheelhouse
that setup.sh built (.venv/wheelhouse), never from a registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, SAMPLES

pytestmark = pytest.mark.slow

WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
HOST_NAMES = ("configs", "service", "errors", "nodes", "graphs", "retrievers", "evaluation", "cli")


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    for project in (ROOT, FIXTURES / "host_service"):
        run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", out, project)
    return {w.name.split("-")[0]: w for w in out.glob("*.whl")}


def test_the_wheel_holds_one_top_level_name(wheels):
    names = zipfile.ZipFile(wheels["switchyard"]).namelist()
    assert {n.split("/")[0] for n in names} == {"switchyard", "switchyard-0.1.0.dist-info"}
    assert {
        "switchyard/__init__.py",
        "switchyard/cli.py",
        "switchyard/errors.py",
        "switchyard/graphs/pipeline.py",
        "switchyard/commands/query.py",
        "switchyard/service/routes/ask.py",
        "switchyard/retrievers/store/index_store.py",
        "switchyard/run_context.py",
        "switchyard/configs/fixed.yaml",
        "switchyard/service/static/index.html",
    } <= set(names)


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory, wheels) -> Path:
    if not WHEELHOUSE.is_dir():
        pytest.fail(f"{WHEELHOUSE} is missing: setup.sh builds it")
    env_dir = tmp_path_factory.mktemp("host") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    run(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        WHEELHOUSE,
        f"switchyard[local] @ {wheels['switchyard'].as_uri()}",
        wheels["host_service"],
        "llm",
    )
    return env_dir


def test_switchyard_and_the_host_import_side_by_side(fresh_env):
    code = (
        "import importlib, json, switchyard, llm; "
        f"host = {{n: importlib.import_module(n).OWNER for n in {HOST_NAMES!r}}}; "
        "from switchyard import Pipeline, load_config; from switchyard.llm.client import LLM; "
        "print(json.dumps({'host': host, 'llm': llm.__file__, 'switchyard': switchyard.__file__}))"
    )
    seen = json.loads(run(fresh_env / "bin" / "python", "-c", code, cwd=fresh_env).stdout)
    assert set(seen["host"].values()) == {"host-service"}
    assert seen["llm"].endswith("site-packages/llm/__init__.py")  # PyPI's llm, untouched
    assert seen["switchyard"].endswith("site-packages/switchyard/__init__.py")


def test_the_core_brings_no_pytorch(fresh_env):
    """The core (with `local`) embeds with the packaged MiniLM on OpenVINO: none of the heavy stack is installed."""
    heavy = ("torch", "sentence_transformers", "transformers", "scipy", "sklearn")
    code = f"import importlib.util, json; print(json.dumps([n for n in {heavy!r} if importlib.util.find_spec(n)]))"
    assert json.loads(run(fresh_env / "bin" / "python", "-c", code, cwd=fresh_env).stdout) == []


def test_switchyard_ask_answers_there(fresh_env, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SWITCHYARD_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    switchyard = fresh_env / "bin" / "switchyard"
    index = tmp_path / "index"
    run(switchyard, "ingest", SAMPLES, "--index-dir", index, "--no-progress", env=env, cwd=tmp_path)
    done = run(
        switchyard, "ask", "Who patented the knuckle coupler?", "--index-dir", index, "--json", env=env, cwd=tmp_path
    )
    result = json.loads(done.stdout)
    assert result["answer"] and result["usage"]["llm_calls"] >= 1  # the packaged SmolLM2 answered
    assert any(c["doc_id"] for c in result["citations"]) or result["abstained"]


def test_a_missing_extra_is_one_line_naming_it(fresh_env, tmp_path):
    done = subprocess.run(
        [fresh_env / "bin" / "switchyard", "serve", "--index-dir", tmp_path / "index"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: switchyard serve needs ")
    assert line.endswith("install the 'server' extra (pip install 'switchyard[server]')")
