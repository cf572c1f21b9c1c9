"""End to end with real models: the packaged GGUF through llama-cpp-python, and the `openai` backend talking to a
real OpenAI-compatible server (llama_cpp.server with the same GGUF) started on 127.0.0.1 by the test."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, free_port


def _check_grounded(result):
    assert result.answer.strip()
    assert result.usage.llm_calls >= 2 and result.usage.prompt_tokens > 0
    if not result.abstained:
        kept = {p.split(" (")[0] for e in result.trace if e.node == "grade" for p in e.output["graded"]}
        assert result.citations and {c.doc_id for c in result.citations} <= kept


@pytest.mark.slow
class TestRealModels:
    def test_local_model_answers_through_the_graph(self, make_pipeline, local_llm):
        result = make_pipeline(llm=local_llm).ask("Who patented the knuckle coupler?")
        assert [e.node for e in result.trace][:4] == ["rewrite", "retrieve", "rerank", "grade"]
        _check_grounded(result)
        assert result.trace[0].llm_calls == 1  # the rewrite asked the model

    def test_openai_backend_against_local_server(self, make_pipeline, llama_server):
        from switchyard.configs.loader import CONFIG_DIR

        pipe = make_pipeline(
            f"llm.base_url={llama_server}",
            "llm.model=smollm2",
            "llm.timeout_s=300",
            config_file=CONFIG_DIR / "fixed-openai.yaml",
        )
        result = pipe.ask("Who patented the knuckle coupler?")
        assert pipe.resources.llm.backend.name == "openai"
        _check_grounded(result)
        assert result.config.resolved["llm"]["backend"] == "openai"

    def test_agent_openai_config_against_local_server(self, make_pipeline, llama_server):
        from switchyard.configs.loader import CONFIG_DIR

        pipe = make_pipeline(
            f"llm.base_url={llama_server}",
            "llm.timeout_s=300",
            "graph.router.max_steps=4",
            config_file=CONFIG_DIR / "agent-openai.yaml",
        )
        result = pipe.ask("What is standard gauge?")
        assert pipe.resources.llm.backend.name == "openai" and pipe.config.graph.mode == "agent"
        assert 1 <= len(result.steps) <= 5 and result.steps[-1]["action"] in ("answer", "abstain")
        assert result.usage.llm_calls >= 1

    def test_concurrent_runs_against_local_server(self, make_pipeline, llama_server):
        """Four barrier-started runs through one Pipeline against the real server: what each run returns and
        counts is what it returns and counts alone."""
        from switchyard.configs.loader import CONFIG_DIR
        from tests.graphs.test_concurrency import QUESTIONS, ask_together, essence

        pipe = make_pipeline(
            f"llm.base_url={llama_server}",
            "llm.model=smollm2",
            "llm.timeout_s=300",
            config_file=CONFIG_DIR / "fixed-openai.yaml",
        )
        sequential = [essence(pipe.ask(q)) for q in QUESTIONS]
        assert [essence(r) for r in ask_together(pipe, QUESTIONS)] == sequential

    def test_stream_against_local_server(self, make_pipeline, llama_server):
        from switchyard.configs.loader import CONFIG_DIR

        pipe = make_pipeline(
            f"llm.base_url={llama_server}",
            "llm.model=smollm2",
            "llm.timeout_s=300",
            config_file=CONFIG_DIR / "fixed-openai.yaml",
        )
        events = list(pipe.stream("Who patented the knuckle coupler?"))
        assert events[-1].event == "answer", events[-1]
        tokens = [e.text for e in events if e.event == "token"]
        answer_end = next(e for e in events if e.event == "node_end" and e.node == "answer")
        if answer_end.llm_calls:
            assert len(tokens) > 1 and answer_end.completion_tokens > 0  # usage came with the stream

    def test_cli_ask_json_via_server(self, sample_index, llama_server):
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "cli.py"),
                "ask",
                "What protects workers on a track?",
                "--json",
                "--config",
                str(ROOT / "configs" / "fixed-openai.yaml"),
                "--index-dir",
                str(sample_index),
                "--set",
                f"llm.base_url={llama_server}",
                "--set",
                "grade.method=score",
                "--set",
                "llm.timeout_s=300",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert set(data) >= {"answer", "abstained", "citations", "trace", "usage", "config"}
        assert all(set(c) >= {"n", "doc_id", "title", "source", "page", "text"} for c in data["citations"])


@pytest.mark.slow
def test_unreachable_server_is_one_clear_line(sample_index):
    port = free_port()  # nothing listens there
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "ask",
            "anything",
            "--config",
            str(ROOT / "configs" / "fixed-openai.yaml"),
            "--index-dir",
            str(sample_index),
            "--set",
            f"llm.base_url=http://127.0.0.1:{port}/v1",
            "--set",
            "llm.max_retries=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OPENAI_API_KEY": "x"},
    )
    assert out.returncode == 1
    assert (
        "failed after 2 tries (unreachable" in out.stderr
        and "Traceback" not in out.stderr
        and out.stderr.count("\n") == 1
    )


@pytest.mark.slow
def test_agent_with_the_real_local_model_then_replay(make_pipeline, local_llm, tmp_path):
    result = make_pipeline("graph.mode=agent", "graph.router.max_steps=6", llm=local_llm).ask(
        "Who patented the knuckle coupler?"
    )
    steps = result.steps
    assert 1 <= len(steps) <= 7 and steps[-1]["action"] in ("answer", "abstain")
    assert result.answer.strip() and result.usage.llm_calls >= 1
    assert all({"step", "thought", "action", "args", "observation", "guard", "router_ms"} <= set(s) for s in steps)
    if not result.abstained:
        assert result.citations
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(result.to_json()))
    out = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "trace", str(saved)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "step 1:" in out.stdout and f"step {len(steps)}:" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, content_type, said",
    [
        (b"<html>proxy error page</html>", "text/html", "HTTP 200 with a body that is not JSON"),
        (b'{"id": "x", "object": "chat.completion", "model": "m"}', "application/json", "the reply has no 'choices'"),
    ],
)
def test_misbehaving_server_is_one_clear_line(sample_index, body, content_type, said):
    from tests.canned_server import CannedServer

    server = CannedServer(body, content_type)
    try:
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "cli.py"),
                "ask",
                "anything",
                "--config",
                "fixed-openai",
                "--index-dir",
                str(sample_index),
                "--set",
                f"llm.base_url={server.url}",
                "--set",
                "llm.max_retries=1",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OPENAI_API_KEY": "x"},
        )
    finally:
        server.close()
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr == (
        f"error: LLM backend {server.url} failed after 2 tries (misbehaving server at {server.url}: {said})\n"
    )


@pytest.mark.slow
def test_openai_backend_forced_tool_call_against_local_server(llama_server):
    from switchyard.llm.client import LLM
    from switchyard.llm.openai_backend import OpenAIBackend
    from switchyard.nodes.router import ROUTER_TOOLS

    llm = LLM(OpenAIBackend(llama_server, "smollm2", timeout_s=300), max_tokens=40)
    forced = {"type": "function", "function": {"name": "abstain"}}
    reply = llm.call_tools(
        [{"role": "user", "content": "Nothing here answers the question."}], ROUTER_TOOLS, tool_choice=forced
    )
    assert [c["name"] for c in reply.tool_calls] == ["abstain"]
    assert isinstance(json.loads(reply.tool_calls[0]["arguments"]), dict)


@pytest.mark.slow
def test_openai_backend_fits_an_overlong_prompt_to_the_local_servers_context(llama_server):
    """The real server (n_ctx 2048) refuses a ~6,000-token prompt with HTTP 400; it is shortened and answered."""
    from switchyard.llm.openai_backend import OpenAIBackend

    dense = " ".join(str(i * 7919 % 100003) for i in range(3000))
    reply = OpenAIBackend(llama_server, "smollm2", timeout_s=300).chat(
        [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": dense}],
        max_tokens=32,
        temperature=0.0,
    )
    assert 1024 < reply.prompt_tokens <= 2048 - 32
