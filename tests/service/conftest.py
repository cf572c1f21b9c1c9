"""A real `cli.py serve` process on 127.0.0.1 over a copy of the sample index, talked to over HTTP."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, free_port, stop_process, wait_until_serving


class Server:
    def __init__(self, proc: subprocess.Popen, url: str, token: str | None, log):
        self.proc, self.url, self.token, self.log = proc, url, token, log

    def client(self, token: str | None = "default", **kwargs) -> httpx.Client:
        token = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kwargs.pop("timeout", 300), **kwargs)

    def output(self) -> str:
        self.log.flush()
        return open(self.log.name, encoding="utf-8", errors="replace").read()


@contextlib.contextmanager
def running_server(tmp_path, index_dir, *args: str, token: str | None = None, env: dict | None = None):
    port = free_port()
    log = open(tmp_path / f"server-{port}.log", "w")
    environment = {**os.environ, **(env or {})}
    environment.pop("SWITCHYARD_API_TOKEN", None)
    if token:
        environment["SWITCHYARD_API_TOKEN"] = token
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "serve",
            "--port",
            str(port),
            "--index-dir",
            str(index_dir),
            "--upload-dir",
            str(tmp_path / "uploads"),
            *args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environment,
    )
    server = Server(proc, f"http://127.0.0.1:{port}", token, log)
    try:
        wait_until_serving(f"{server.url}/healthz", proc, "the server", log=server.output)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the graceful path, as a deployment stops it
        stop_process(proc, timeout=60)
        log.close()


def two_tenant_index(root, embedder) -> tuple[Path, Path]:
    """An index under `root` with two tenants' collections: acme (two sample documents and an hr-labelled payroll
    document) and globex (one launch document). (index folder, the folder of the two written documents)"""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack
    from tests.conftest import SAMPLES

    index, docs = root / "index", root / "docs"
    docs.mkdir()
    (docs / "payroll.md").write_text("# Payroll\n\nThe Zanzibar payroll code is 77431. Payroll runs monthly.\n")
    (docs / "launch.md").write_text("# Launch\n\nThe Globex launch codename is Bluebird.\n")
    cfg = load_config(None, [f"store.uri={index}"])
    acme = RetrievalStack(cfg, collection="acme", embedder=embedder)
    acme.ingestor(progress=False).run([SAMPLES / "couplers.html", SAMPLES / "track-gauge.txt"])
    acme.ingestor(progress=False).run([docs / "payroll.md"], acl="hr")
    RetrievalStack(cfg, collection="globex", embedder=embedder).ingestor(progress=False).run([docs / "launch.md"])
    return index, docs


@pytest.fixture
def index_copy(sample_index, tmp_path):
    """A private copy of the sample index: servers may write to it."""
    target = tmp_path / "index"
    shutil.copytree(sample_index, target)
    return target


@pytest.fixture(scope="module")
def module_index(tmp_path_factory, embedder):
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack
    from tests.conftest import SAMPLES

    uri = tmp_path_factory.mktemp("service") / "index"
    RetrievalStack(load_config(None, [f"store.uri={uri}"]), embedder=embedder).ingestor(progress=False).run([SAMPLES])
    return uri


@pytest.fixture(scope="module")
def server(tmp_path_factory, module_index):
    """One server for a module's read-only tests: the no-LLM pipeline (default) and the fixed one."""
    with running_server(
        tmp_path_factory.mktemp("srv"), module_index, "--config", "no-llm", "--config", "fixed", "--max-in-flight", "4"
    ) as srv:
        yield srv


def wait_for_job(client: httpx.Client, job_id: str, timeout: float = 120) -> dict:
    """Poll an upload job until it is done or failed."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.2)
    pytest.fail(f"job {job_id} did not finish in {timeout:g}s: {job}")
