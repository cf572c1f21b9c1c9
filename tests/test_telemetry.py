"""OpenTelemetry traces (package/tracing.py; the SDK set-up of the CLI and server in package/otel_sdk.py), checked against a real OTLP/HTTP receiver on 127.0.0.1 that decodes the
protobuf exports (tests/otlp_receiver.py): off by default with no SDK loaded; on with OTEL_EXPORTER_OTLP_ENDPOINT,
one complete trace per run (run, nodes, retrieval, LLM calls) even for runs in flight together; the trace id in
`ask --json`, the HTTP response header and evaluation rows."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
from collections import defaultdict

import pytest

from switchyard import otel_sdk
from tests.conftest import FIXTURES, ROOT, SAMPLES
from tests.nodes.scripted import scripted_llm
from tests.otlp_receiver import OtlpReceiver

ANSWER = "Eli Janney patented the knuckle coupler [1]."


def forget_global_provider() -> None:
    """OpenTelemetry lets a process install its global provider once; tests start afresh (as its own tests do)."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def receiver(monkeypatch):
    """Tracing on for this process as the CLI and server set it up, exporting to a fresh receiver; off again
    afterwards."""
    with OtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.origin)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "switchyard-test")
        forget_global_provider()
        otel_sdk.install()
        try:
            yield rec
        finally:
            monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
            otel_sdk.shutdown()
            forget_global_provider()


def by_trace(spans) -> dict[str, list]:
    traces = defaultdict(list)
    for s in spans:
        traces[s.trace_id].append(s)
    return {t: sorted(ss, key=lambda s: s.start_ns) for t, ss in traces.items()}


def check_run_trace(spans, result, root_parent: str = ""):
    """One run's spans form one complete tree under its run span, matching the run's own trace and usage."""
    ids = {s.span_id for s in spans}
    (run,) = [s for s in spans if s.attributes.get("switchyard.run_id") == result.run_id]
    assert run.parent_id == root_parent
    assert all(s.parent_id in ids for s in spans if s is not run and s.parent_id != root_parent)
    nodes = [s for s in spans if s.attributes.get("openinference.span.kind") == "CHAIN" and s is not run]
    assert [s.name for s in nodes] == [e.node for e in result.trace]
    assert all(s.parent_id == run.span_id for s in nodes)
    node_ids = {s.span_id for s in nodes}
    decisions = [s for s in spans if s.name == "decision"]
    assert all(s.parent_id in node_ids for s in decisions)
    llm = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(llm) == result.usage.llm_calls
    assert sum(s.attributes["llm.token_count.prompt"] for s in llm) == result.usage.prompt_tokens
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in llm) == result.usage.completion_tokens
    assert all(s.parent_id in node_ids | {d.span_id for d in decisions} and s.kind == "CLIENT" for s in llm)
    retrievals = [s for s in spans if s.name == "retrieval"]
    assert retrievals and all(s.attributes["openinference.span.kind"] == "RETRIEVER" for s in retrievals)
    assert {s.parent_id for s in retrievals} <= node_ids
    return run, nodes, llm, retrievals


class TestOff:
    def test_nothing_is_set_up(self):
        """No exporter, no instrumentation, no tracer provider (langsmith, which LangChain imports, imports the
        SDK's trace module on its own when it is installed; it sets nothing up either)."""
        code = (
            "import sys; import switchyard.graphs.pipeline, switchyard.service.app, switchyard.evaluation.runner; "
            "from switchyard import cli, otel_sdk; from switchyard import tracing; "
            "from opentelemetry import trace; cli.set_process_defaults(); "
            "assert otel_sdk.provider() is None and tracing.current_trace_id() is None; "
            "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'; "
            "print([m for m in sys.modules if m.startswith(('opentelemetry.exporter', "
            "'opentelemetry.instrumentation'))])"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"

    def test_the_json_has_no_trace_id(self, make_pipeline):
        llm, _ = scripted_llm(answer=ANSWER)
        result = make_pipeline(llm=llm).ask("Who patented the knuckle coupler?")
        assert result.trace_id is None and "trace_id" not in result.to_json()


class TestOn:
    def test_llm_span_model_tokens_latency_and_cache_hit(self, receiver, tmp_path):
        from switchyard.llm.cache import CachingBackend, ReplyStore
        from switchyard.llm.client import LLM
        from tests.scripted_backend import ScriptedBackend

        backend = CachingBackend(
            ScriptedBackend(["four words of reply"]),
            ReplyStore(tmp_path),
            {"backend": "scripted", "model": "tiny-model"},
        )
        llm = LLM(backend, model="tiny-model")
        messages = [{"role": "user", "content": "say four words"}]
        assert llm.generate(messages) == llm.generate(messages) == "four words of reply"
        otel_sdk.flush()
        first, second = sorted(receiver.spans(), key=lambda s: s.start_ns)
        for s in (first, second):
            assert s.name == "chat tiny-model" and s.kind == "CLIENT" and s.service == "switchyard-test"
            assert s.attributes["openinference.span.kind"] == "LLM"
            assert s.attributes["llm.model_name"] == s.attributes["gen_ai.request.model"] == "tiny-model"
            assert s.attributes["gen_ai.operation.name"] == "chat"
            assert (s.attributes["llm.token_count.prompt"], s.attributes["llm.token_count.completion"]) == (3, 4)
            assert s.attributes["switchyard.llm.latency_ms"] >= 0
        assert (first.attributes["switchyard.llm.cache_hit"], second.attributes["switchyard.llm.cache_hit"]) == (
            False,
            True,
        )

    def test_two_overlapping_runs_give_two_separate_complete_traces(self, receiver, make_pipeline):
        """Both runs are inside an LLM call at the same moment (a barrier in the backend), in two threads."""
        llm, backend = scripted_llm(answer=ANSWER)
        barrier, calls, inner = threading.Barrier(2, timeout=120), itertools.count(), backend.chat

        def chat(messages, **kwargs):
            if next(calls) < 2:
                barrier.wait()
            return inner(messages, **kwargs)

        backend.chat = chat
        pipe = make_pipeline(llm=llm)
        questions = ["Who patented the knuckle coupler?", "What is standard gauge?"]
        results: list = [None, None]
        threads = [
            threading.Thread(target=lambda i=i: results.__setitem__(i, pipe.ask(questions[i]))) for i in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert all(results), "a run failed"
        otel_sdk.flush()
        traces = by_trace(receiver.spans())
        assert set(traces) == {r.trace_id for r in results} and len(traces) == 2
        for result in results:
            run, nodes, llm_spans, retrievals = check_run_trace(traces[result.trace_id], result)
            assert run.name == pipe.graph.name and run.attributes["switchyard.config_hash"] == pipe.config_hash
            assert llm_spans and all(s.attributes["llm.model_name"] == "scripted" for s in llm_spans)
            retrieval = retrievals[0].attributes
            assert retrieval["switchyard.retrieval.collection"] == pipe.config.store.collection
            assert retrieval["switchyard.retrieval.k"] == pipe.config.retrieve.top_k
            assert len(retrieval["switchyard.retrieval.top_scores"]) == min(
                5, retrieval["switchyard.retrieval.returned"]
            )
            assert "input.value" not in run.attributes  # no text unless content capture is asked for

    def test_stream_and_agent_decisions(self, receiver, make_pipeline, monkeypatch):
        from switchyard.configs.loader import CONFIG_DIR

        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        router = ['{"action": "retrieve", "query": "knuckle coupler"}', '{"action": "answer"}']
        llm, _ = scripted_llm(router=router, answer=ANSWER)
        pipe = make_pipeline("graph.router.max_steps=4", llm=llm, config_file=CONFIG_DIR / "agent-zeroshot.yaml")
        events = list(pipe.stream("Who patented the knuckle coupler?", where="source~couplers"))
        result = events[-1].result
        otel_sdk.flush()
        spans = by_trace(receiver.spans())[result.trace_id]
        run, *_ = check_run_trace(spans, result)
        assert run.attributes["input.value"] == "Who patented the knuckle coupler?"
        assert run.attributes["switchyard.filter"] == "source~couplers"
        decisions = [s for s in spans if s.name == "decision"]
        assert [d.attributes["switchyard.agent.action"] for d in decisions] == [s["action"] for s in result.steps]
        assert all(d.attributes["openinference.span.kind"] == "AGENT" for d in decisions)
        assert json.loads(decisions[0].attributes["switchyard.agent.args"]) == {"query": "knuckle coupler"}
        retrieval = next(s for s in spans if s.name == "retrieval").attributes
        assert retrieval["switchyard.retrieval.filter"] == "source~couplers"


def cli(*args, env: dict):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **env},
        cwd=ROOT,
    )


@pytest.mark.slow
class TestEntryPoints:
    def test_ask_json_and_eval_rows_carry_the_trace_id(self, sample_index, tmp_path):
        with OtlpReceiver() as rec:
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rec.origin}
            done = cli(
                "ask",
                "Who patented the knuckle coupler?",
                "--config",
                "no-llm",
                "--index-dir",
                sample_index,
                "--json",
                env=env,
            )
            assert done.returncode == 0, done.stderr
            trace_id = json.loads(done.stdout)["trace_id"]
            out = tmp_path / "eval"
            done = cli(
                "eval",
                FIXTURES / "tiny_qa" / "questions.jsonl",
                "--corpus",
                SAMPLES,
                "--configs",
                ROOT / "configs" / "no-llm.yaml",
                "--out",
                out,
                "--no-progress",
                env=env,
            )
            assert done.returncode == 0, done.stderr
            rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
            traces = by_trace(rec.spans())  # both processes flushed their spans at exit
        assert len(trace_id) == 32 and trace_id in traces
        assert [s.name for s in traces[trace_id] if s.parent_id == ""] == ["switchyard-fixed"]
        assert len({r["trace_id"] for r in rows}) == len(rows) == 4
        assert all(r["trace_id"] in traces for r in rows)

    def test_http_request_span_and_header(self, sample_index, tmp_path):
        from tests.service.conftest import running_server

        index = tmp_path / "index"
        shutil.copytree(sample_index, index)  # the server may write to its index
        with (
            OtlpReceiver() as rec,
            running_server(
                tmp_path, index, "--config", "no-llm", env={"OTEL_EXPORTER_OTLP_ENDPOINT": rec.origin}
            ) as server,
        ):
            with server.client() as http:
                reply = http.post("/v1/ask", json={"question": "What is standard gauge?"})
                assert reply.status_code == 200, reply.text
                streamed = http.post("/v1/ask/stream", json={"question": "What is standard gauge?"})
                assert streamed.status_code == 200
            body = reply.json()
        traces = by_trace(rec.spans())  # the server flushed its spans when it stopped
        assert reply.headers["x-trace-id"] == body["trace_id"]
        spans = traces[body["trace_id"]]
        (request,) = [s for s in spans if s.parent_id == ""]
        assert request.kind == "SERVER" and request.name == "POST /v1/ask"
        assert request.attributes.get("http.status_code", request.attributes.get("http.response.status_code")) == 200
        (run,) = [s for s in spans if s.name == "switchyard-fixed"]
        assert run.parent_id == request.span_id
        assert {"rewrite", "retrieve", "rerank", "grade", "answer"} <= {s.name for s in spans}
        stream_spans = traces[streamed.headers["x-trace-id"]]
        assert {"POST /v1/ask/stream", "switchyard-fixed", "retrieval"} <= {s.name for s in stream_spans}
        assert not any(s.name.endswith(("http send", "http receive")) for s in rec.spans())
