"""Switchyard used as a library changes nothing in the host process: a real `ask` (no-LLM config, the packaged
embedder, a LanceDB index on disk) run in a fresh interpreter leaves the environment, the threads and the logging
set-up as they were, and its spans reach the tracer provider the host installed (the OpenTelemetry API only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import SAMPLES

pytestmark = pytest.mark.slow

HOST = r"""
import json, logging, os, sys, threading
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
host_provider = TracerProvider()
host_provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(host_provider)            # the host's own provider, installed before Switchyard

def threads():
    return sorted(t.name for t in threading.enumerate())

def logging_state():
    names = ["", "pypdf", "transformers", "sentence_transformers", "httpx", "ray", "ray.data"]
    return {n: [logging.getLogger(n).level, len(logging.getLogger(n).handlers)] for n in names}

env0, threads0, logging0 = dict(os.environ), threads(), logging_state()
import switchyard
import_threads = threads()
from switchyard import Pipeline, RetrievalStack, load_config
imported_threads = threads()

index, corpus = sys.argv[1], sys.argv[2]
config = load_config("no-llm", [f"store.uri={index}"])
stack = RetrievalStack(config)
stack.ingestor(progress=False).run([corpus])
stack.close()
with Pipeline(config) as pipe:
    result = pipe.ask("Who patented the knuckle coupler?")
    run_span = pipe.graph.name
after_close = threads()
print(json.dumps({
    "env_changed": sorted(k for k in set(env0) | set(os.environ) if env0.get(k) != os.environ.get(k)),
    "threads_before": threads0, "threads_after_import": import_threads, "threads_after_names": imported_threads,
    "threads_after_close": after_close,
    "logging_before": logging0, "logging_after": logging_state(),
    "global_provider_is_host": trace.get_tracer_provider() is host_provider,
    "run_span": run_span, "spans": [s.name for s in exporter.get_finished_spans()],
    "answer": result.answer, "citations": len(result.citations),
}))
"""

# the process defaults the CLI sets (configs/runtime_env.py), except the one that keeps this test offline
CLI_DEFAULTS = (
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_PROGRESS_BARS",
    "TRANSFORMERS_VERBOSITY",
    "TOKENIZERS_PARALLELISM",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
    "TRANSFORMERS_OFFLINE",
    "RAY_IGNORE_UNHANDLED_ERRORS",
)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if k not in CLI_DEFAULTS and not k.startswith("OTEL_")}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", HOST, str(tmp_path_factory.mktemp("host") / "index"), str(SAMPLES)],
        cwd=tmp_path_factory.mktemp("cwd"),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_run_answers(host):
    assert "Janney" in host["answer"] and host["citations"] >= 1


def test_no_environment_variable_changes(host):
    assert host["env_changed"] == []


def test_no_thread_at_import_and_none_left_after_close(host):
    assert host["threads_after_import"] == host["threads_before"]
    assert host["threads_after_names"] == host["threads_before"]
    assert not [t for t in host["threads_after_close"] if t.startswith("hybrid")]


def test_no_logging_handler_or_level_changes(host):
    assert host["logging_after"] == host["logging_before"]


def test_spans_reach_the_hosts_provider(host):
    assert host["global_provider_is_host"]
    assert host["run_span"] in host["spans"] and "retrieval" in host["spans"], host["spans"]


def test_the_public_api_is_pinned():
    import switchyard

    assert switchyard.__all__ == sorted(
        [
            "ALL",
            "AccessError",
            "Approval",
            "ApprovalError",
            "AskResult",
            "Citation",
            "CollectionNotFound",
            "ConfigError",
            "ContextOverflowError",
            "Evaluator",
            "FilterError",
            "LLMError",
            "MissingExtra",
            "Passage",
            "PauseExpired",
            "Paused",
            "PendingAction",
            "Pipeline",
            "QuestionError",
            "RetrievalStack",
            "RunCancelled",
            "RunContext",
            "SharedModels",
            "StoreError",
            "StreamEvent",
            "SwitchyardConfig",
            "SwitchyardError",
            "SwitchyardRetriever",
            "TraceEntry",
            "UnknownThread",
            "Usage",
            "UsageError",
            "build_graph",
            "load_config",
            "load_dataset",
        ]
    ) + ["__version__"]
    for name in switchyard.__all__:
        assert getattr(switchyard, name) is not None
    from switchyard.graphs.pipeline import Pipeline

    assert switchyard.Pipeline is Pipeline
    with pytest.raises(AttributeError):
        switchyard.NoSuchName  # noqa: B018
