"""Shared fixtures: the real packaged embedding model (loaded once per session) and temp-dir indexes."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from switchyard.configs import runtime_env  # noqa: E402

runtime_env.apply()

import pytest  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = ROOT / "samples" / "corpus"


# The fast lane (`-m "not slow"`) loads no model: the session's embedder answers from the vectors recorded here (one
# packed file), and every model loader fails the test that reaches it. The full suite embeds with the real model.
# A fast test that embeds a text not recorded fails with VectorCacheMiss: record again with
#   .venv/bin/python -m pytest -m "not slow" --record-vectors && .venv/bin/python bench/pack_run.py tests/fixtures/fast-lane
FAST_LANE_VECTORS = FIXTURES / "fast-lane" / "vectors"
E5_MODEL = "e5-small"  # retrieve.retrievers.e5's model
MODEL_LOADERS = (  # (module, attribute): every place a model file is read
    ("switchyard.retrievers.embedder", "Embedder._load"),
    ("switchyard.retrievers.onnx_template", "fill"),
    ("switchyard.retrievers.e5_model", "parse"),
    ("switchyard.retrievers.cross_encoder_onnx", "OnnxCrossEncoder._load"),
    ("switchyard.retrievers.rerankers", "_SentenceTransformersCrossEncoder._load"),
    ("switchyard.llm.llamacpp", "LlamaCppBackend._load"),
)


class ModelLoadInFastLane(AssertionError):
    """A test of the fast lane reached a model loader: mark it slow, or give it recorded vectors / a scripted LLM."""


def pytest_addoption(parser):
    parser.addoption(
        "--record-vectors",
        action="store_true",
        help=f"record the vectors the session's embedder computes into {FAST_LANE_VECTORS} (then pack them)",
    )


MODEL_SUFFIXES = (".safetensors", ".onnx", ".gguf", ".bin", ".pt", ".pth")  # weights, graphs, GGUF, 4-bit e5


def mapped_models() -> set[str]:
    """Model files mapped into this process: how safetensors, llama.cpp and the ONNX runtimes hold loaded weights.
    (A file only read, e.g. hashed for a run's manifest, is not a loaded model.)"""
    return {
        line.split()[-1]
        for line in Path("/proc/self/maps").read_text().splitlines()
        if line.split()[-1].endswith(MODEL_SUFFIXES)
    }


def pytest_sessionfinish(session, exitstatus):
    """The fast lane's proof for the whole session: no model file is mapped into this process at its end."""
    if vector_mode(session.config) == "replay" and (mapped := mapped_models()):
        print(f"\nthe fast lane loaded model files: {sorted(mapped)}")
        session.exitstatus = 1


def vector_mode(config) -> str:
    """'record' (--record-vectors), 'replay' (the fast lane: slow tests deselected) or 'live' (the real model)."""
    if config.getoption("--record-vectors"):
        return "record"
    return "replay" if config.getoption("markexpr").replace(" ", "") == "notslow" else "live"


def fast_lane_overrides(config) -> list[str]:
    """`--set` overrides for a process a fast test starts (the CLI, a server): the session's recorded vectors, replayed
    in the fast lane, so that process loads no model either; none in the full suite."""
    mode = vector_mode(config)
    if mode == "live":
        return []
    recorded = ["embedding.backend=torch", f"embedding.vector_cache={FAST_LANE_VECTORS}"]
    return recorded + ["embedding.replay=true"] * (mode == "replay")


@pytest.fixture(autouse=True)
def fast_lane(request, monkeypatch):
    """Outside slow tests, when recording or replaying: whatever builds the packaged MiniLM from a config (the
    service, pipelines, stacks) gets the session's embedder, so its vectors are recorded / replayed too; and when
    replaying, every model loader raises ModelLoadInFastLane and a test that left a model file mapped fails."""
    mode = vector_mode(request.config)
    if mode == "live":
        share_e5_models(request.getfixturevalue("live_e5_models"), monkeypatch)
    if mode == "live" or request.node.get_closest_marker("slow"):
        yield
        return
    import importlib

    from switchyard.retrievers import vector_recording

    sessions = {"minilm": request.getfixturevalue("embedder"), E5_MODEL: request.getfixturevalue("e5_embedder")}
    build = vector_recording.build_embedder

    def build_embedder(model: str = "minilm", vector_cache: str | None = None, replay: bool = False, **settings):
        if model not in sessions:
            return build(model=model, vector_cache=vector_cache, replay=replay, **settings)
        if not vector_cache:
            return sessions[model]
        return vector_recording.RecordingEmbedder(
            sessions[model], vector_recording.VectorRecording(vector_cache, model, replay)
        )

    builds_embedders_with(build_embedder, monkeypatch)
    if mode != "replay":
        yield
        return
    for module, attribute in MODEL_LOADERS:
        owner = importlib.import_module(module)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)

        def refuse(*args, _where=f"{module}.{attribute}", **kwargs):
            raise ModelLoadInFastLane(f"{_where}: the fast lane loads no model (mark the test slow)")

        monkeypatch.setattr(owner, name, refuse)
    before = mapped_models()
    yield
    if loaded := mapped_models() - before:  # per test: under pytest-xdist a worker's session status is not the run's
        pytest.fail(f"the fast lane loaded model files: {sorted(loaded)}")


def _session_embedder(request, model: str, **settings):
    """One model for the session (torch reference backend); in the fast lane, its recorded vectors and no model."""
    from switchyard.retrievers.embedder import Embedder
    from switchyard.retrievers.vector_recording import RecordingEmbedder, VectorRecording

    loaded = Embedder(model, **settings)
    mode = vector_mode(request.config)
    if mode == "live":
        yield loaded
        return
    recording = VectorRecording(FAST_LANE_VECTORS, model, replay=mode == "replay")
    yield RecordingEmbedder(loaded, recording)
    recording.flush()


@pytest.fixture(scope="session")
def live_e5_models() -> dict:
    """The e5 models the full suite's stacks built from a config share: one per runtime setting."""
    return {}


def share_e5_models(shared: dict, monkeypatch) -> None:
    """Whatever builds e5 from a config in this process (stacks, pipelines, the service) gets one loaded model per
    runtime setting for the whole session: each e5 model holds ~0.8 GB, and the suite builds hundreds of stacks."""
    import json

    from switchyard.retrievers import vector_recording

    build = vector_recording.build_embedder

    def build_embedder(model: str = "minilm", vector_cache: str | None = None, replay: bool = False, **settings):
        if model != E5_MODEL or vector_cache:
            return build(model=model, vector_cache=vector_cache, replay=replay, **settings)
        key = json.dumps(settings, sort_keys=True, default=str)
        if key not in shared:
            shared[key] = build(model=model, **settings)
        return shared[key]

    builds_embedders_with(build_embedder, monkeypatch)


def builds_embedders_with(build_embedder, monkeypatch) -> None:
    """Make `build_embedder` what every stack and pipeline of this process builds its embedders from a config with."""
    import importlib

    for module in ("switchyard.nodes.resources", "switchyard.retrievers.stack"):
        monkeypatch.setattr(importlib.import_module(module), "build_embedder", build_embedder)


@pytest.fixture(scope="session")
def embedder(request):
    """The packaged MiniLM, the default's embedding model."""
    yield from _session_embedder(request, "minilm")


@pytest.fixture(scope="session")
def e5_embedder(request):
    """multilingual-e5-small, the default's e5 vector field (retrieve.retrievers.e5), at its batch size."""
    yield from _session_embedder(request, E5_MODEL, batch_size=16)


def session_models(embedder, e5_embedder) -> dict:
    """RetrievalStack's `embedder` and `field_embedders` arguments: the session's models."""
    return {"embedder": embedder, "field_embedders": {"e5": e5_embedder}}


@pytest.fixture
def make_stack(tmp_path, embedder, e5_embedder):
    """RetrievalStack over a fresh index in tmp_path, sharing the session's models."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    def make(*overrides: str, collection: str | None = None, uri: Path | None = None):
        cfg = load_config(None, [f"store.uri={uri or tmp_path / 'index'}", *overrides])
        return RetrievalStack(cfg, collection=collection, **session_models(embedder, e5_embedder))

    return make


@pytest.fixture
def handbook_pdf(tmp_path):
    from tests.fixtures.pdfs import make_handbook_pdf

    return make_handbook_pdf(tmp_path / "handbook.pdf")


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, embedder, e5_embedder):
    """The bundled sample corpus ingested once per session (read-only for tests)."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    uri = tmp_path_factory.mktemp("sample") / "index"
    stack = RetrievalStack(load_config(None, [f"store.uri={uri}"]), **session_models(embedder, e5_embedder))
    stack.ingestor(progress=False).run([SAMPLES])
    return uri


@pytest.fixture
def make_pipeline(sample_index, embedder, e5_embedder):
    """A Pipeline over the sample index; pass `llm=` (e.g. a scripted one) to replace the configured backend.
    The graph tests script whole-sentence answers, so the answer format is `sentences` unless a test names one
    (`answer_format="short"`: the scripted answer is then the JSON short answer)."""
    from switchyard.configs.loader import load_config
    from switchyard.graphs.pipeline import Pipeline
    from switchyard.nodes.resources import SharedModels

    def make(*overrides: str, llm=None, config_file=None, answer_format: str = "sentences"):
        cfg = load_config(config_file, [f"store.uri={sample_index}", f"answer.format={answer_format}", *overrides])
        models = SharedModels()
        models.provide(cfg.embedding, embedder)
        models.provide(cfg.embedding, e5_embedder, field=cfg.retrieve.retrievers.e5)
        if llm is not None:
            models.provide(cfg.llm, llm)
        return Pipeline(cfg, models)

    return make


@pytest.fixture(scope="session")
def local_llm():
    """The real packaged SmolLM2 GGUF through llama-cpp-python, loaded once."""
    from switchyard.llm.client import LLM
    from switchyard.llm.llamacpp import LlamaCppBackend

    return LLM(LlamaCppBackend(), max_tokens=128)


@pytest.fixture(scope="session")
def llama_server():
    """A real OpenAI-compatible server (llama_cpp.server with the packaged GGUF, model name `smollm2`) on
    127.0.0.1; yields its base URL."""
    with started_llama_server(n_ctx=2048) as url:
        yield url


@contextlib.contextmanager
def started_llama_server(n_ctx: int, chat_format: str | None = None):
    """llama_cpp.server with the packaged GGUF (model name `smollm2`) on a free port of 127.0.0.1, a context of
    `n_ctx` tokens and, when given, a chat format; yields its base URL and stops it after."""
    import subprocess

    from switchyard.llm.llamacpp import packaged_gguf

    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_gguf()), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_threads", "2", "--n_ctx", str(n_ctx), "--model_alias", "smollm2"]
    command += ["--verbose", "False", *(["--chat_format", chat_format] if chat_format else [])]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(f"{url}/models", proc, "llama_cpp.server", log=lambda: proc.stderr.read().decode())
        yield url
    finally:
        stop_process(proc)


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a server a test starts."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(url: str, proc, name: str, timeout: float = 180, log=lambda: "") -> None:
    """Poll `url` until it answers 200; fail with the server's last output if it exits or never answers."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{name} exited with code {proc.returncode}: {log()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop_process(proc)
            pytest.fail(f"{name} did not answer {url} within {timeout:g} s: {log()[-3000:]}")
        time.sleep(0.3)


def stop_process(proc, timeout: float = 20) -> None:
    """Terminate a server process, and kill it if it does not stop in `timeout` seconds."""
    import subprocess

    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server on 127.0.0.1 in a temporary folder (tests/postgres_server.py), stopped at the end of
    the session; `postgres.database()` gives each test a fresh database. Skipped where PostgreSQL's server or the
    postgres extra is missing, except under CI (`CI` set), where that fails: .ci/run installs both."""
    import importlib.util

    from tests.postgres_server import PostgresServer, bindir

    if importlib.util.find_spec("psycopg") is None:
        missing = "the postgres extra (psycopg) is not installed"
    elif bindir() is None:
        missing = "PostgreSQL's server is not installed (Debian: apt-get install postgresql)"
    else:
        missing = None
    if missing and os.environ.get("CI"):
        pytest.fail(f"{missing}; CI must run the PostgreSQL tests (.ci/run installs it)")
    if missing:
        pytest.skip(missing)
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster on 127.0.0.1 (head node with 2 CPUs and a second node with 1), stopped by its
    process ids at the end of the session. Skipped when the ray extra is not installed."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:  # not imported here: this process stays free of Ray
        pytest.skip("the ray extra is not installed (pip install -e '.[ray]')")
    from tests.ray_cluster import LocalCluster

    with LocalCluster(head_cpus=2, worker_cpus=1) as cluster:
        yield cluster
