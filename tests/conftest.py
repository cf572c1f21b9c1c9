"""Shared fixtures: the real packaged embedding model (loaded once per session) and temp-dir indexes."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from switchyard.configs import runtime_env  # noqa: E402

runtime_env.apply()

import pytest  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = ROOT / "samples" / "corpus"


@pytest.fixture(scope="session")
def embedder():
    from switchyard.retrievers.embedder import Embedder

    return Embedder("minilm")


@pytest.fixture
def make_stack(tmp_path, embedder):
    """RetrievalStack over a fresh index in tmp_path, sharing the session's embedding model."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    def make(*overrides: str, collection: str | None = None, uri: Path | None = None):
        cfg = load_config(None, [f"store.uri={uri or tmp_path / 'index'}", *overrides])
        return RetrievalStack(cfg, collection=collection, embedder=embedder)  # reuse the loaded model

    return make


@pytest.fixture
def handbook_pdf(tmp_path):
    from tests.fixtures.pdfs import make_handbook_pdf

    return make_handbook_pdf(tmp_path / "handbook.pdf")


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, embedder):
    """The bundled sample corpus ingested once per session (read-only for tests)."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    uri = tmp_path_factory.mktemp("sample") / "index"
    stack = RetrievalStack(load_config(None, [f"store.uri={uri}"]), embedder=embedder)
    stack.ingestor(progress=False).run([SAMPLES])
    return uri


@pytest.fixture
def make_pipeline(sample_index, embedder):
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
def ray_cluster():
    """A real local Ray cluster on 127.0.0.1 (head node with 2 CPUs and a second node with 1), stopped by its
    process ids at the end of the session. Skipped when the ray extra is not installed."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:  # not imported here: this process stays free of Ray
        pytest.skip("the ray extra is not installed (pip install -e '.[ray]')")
    from tests.ray_cluster import LocalCluster

    with LocalCluster(head_cpus=2, worker_cpus=1) as cluster:
        yield cluster
