"""LangGraph's own server as a real client: `langgraph dev` over the repository's langgraph.json (graphs/pipeline.py
`make_graph`), driven with the official `langgraph-sdk` client. Each pipeline is an assistant made from the run's
`configurable` (pipeline, index_dir, overrides); runs wait, stream one update per node, and an approve pipeline
pauses with an interrupt and resumes with `Command(resume=...)` on the server's own checkpointer. The chat graph
(`switchyard-chat`, `make_chat_graph`) keeps a conversation's messages on a thread.

Offline: the server runs in a temp folder (its `.langgraph_api/` state goes there, not into the repository) with
LangGraph CLI analytics, its version check and LangSmith tracing off; agents talk to a scripted OpenAI-compatible
server on 127.0.0.1 (tests/nodes/scripted.py), one more to the packaged SmolLM2 through llama.cpp.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, free_port, wait_until_serving
from tests.nodes.scripted import zeroshot_agent
from tests.scripted_openai_server import ScriptedOpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

QUESTION = "Who patented the knuckle coupler?"
FIXED_NODES = ["rewrite", "retrieve", "rerank", "grade", "answer"]
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # langgraph_cli/analytics.py: no usage report per command
    "LANGGRAPH_NO_VERSION_CHECK": "true",  # langgraph_api/cli.py: no PyPI query for a newer langgraph-api
}
CALL_S = 180  # the most any one client call may take


def _langgraph() -> str:
    command = Path(sys.executable).parent / "langgraph"
    if not command.exists():
        pytest.skip("langgraph-cli[inmem] is not installed (pip install --no-deps -r requirements-langgraph-lock.txt)")
    return str(command)


@pytest.fixture(scope="module")
def scripted_llm():
    """An OpenAI-compatible server on 127.0.0.1 that plays a whole zeroshot agent run (retrieve, rerank, grade,
    answer)."""
    server = ScriptedOpenAIServer(zeroshot_agent)
    yield server
    server.close()


@pytest.fixture(scope="module")
def langgraph_server(tmp_path_factory):
    """`langgraph dev` on a free port of 127.0.0.1, in its own process group, started from a temp folder with the
    repository's langgraph.json; yields its URL and a function returning its output so far."""
    command = _langgraph()
    home = tmp_path_factory.mktemp("langgraph-dev")
    port = free_port()
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [
            command,
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--config",
            str(ROOT / "langgraph.json"),
        ],
        cwd=home,
        env={**os.environ, **OFFLINE},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def output() -> str:
        log.flush()
        return (home / "server.log").read_text(errors="replace")

    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(f"{url}/ok", proc, "langgraph dev", timeout=120, log=output)
        yield SimpleNamespace(url=url, output=output)
    finally:
        _stop_group(proc)
        log.close()


def _stop_group(proc: subprocess.Popen) -> None:
    """Terminate the server's process group; kill it if it does not stop within 30 s."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    proc.poll()


def drive(server, steps):
    """Run `steps(client)` (a coroutine function) against the server, bounded; on failure, show the server's log."""
    from langgraph_sdk import get_client

    async def go():
        client = get_client(url=server.url, timeout=CALL_S)
        return await asyncio.wait_for(steps(client), timeout=3 * CALL_S)

    try:
        return asyncio.run(go())
    except Exception as exc:
        raise AssertionError(
            f"{type(exc).__name__}: {exc}\n--- langgraph dev output ---\n{server.output()[-4000:]}"
        ) from exc


async def assistant(client, name: str, pipeline: str, index, *overrides: str) -> str:
    made = await client.assistants.create(
        graph_id="switchyard",
        name=name,
        config={"configurable": {"pipeline": pipeline, "index_dir": str(index), "overrides": list(overrides)}},
    )
    return made["assistant_id"]


def test_make_graph_builds_once_per_configurable(sample_index):
    """In process, no server: the cache key, the graph's lack of a checkpointer and its context schema."""
    from switchyard.errors import ConfigError
    from switchyard.graphs.langgraph_server import ServedRunContext, make_graph

    def made(**configurable):
        return make_graph({"configurable": {"index_dir": str(sample_index), **configurable}})

    no_llm = made(pipeline="no-llm", thread_id="a")
    assert made(pipeline="no-llm.yaml", thread_id="b") is no_llm
    assert made(pipeline="no-llm", overrides=["rerank.top_k=3"]) is not no_llm
    approve = made(pipeline="agent-approve")
    assert approve.checkpointer is None and approve.name == "switchyard-agent-zeroshot"
    assert no_llm.context_schema is ServedRunContext
    # what LangGraph builds from the dict the server passes: only a run's own settings are kept
    context = ServedRunContext(pipeline="no-llm", thread_id="t", graph_id="switchyard", seed=7, groups=["staff"])
    assert (context.seed, context.groups, context.meters) == (7, ("staff",), [])
    for bad in ({"pipeline": "nope"}, {"overrides": [3]}, {"pipeline": 3}, {"overrides": ["no.such.key=1"]}):
        with pytest.raises(ConfigError):
            made(**bad)


def test_wait_gives_the_final_state_with_an_answer_and_citations(langgraph_server, sample_index):
    async def steps(client):
        no_llm = await assistant(client, "no-llm", "no-llm", sample_index)
        first = await client.runs.wait(None, no_llm, input={"question": QUESTION})
        again = await client.runs.wait(None, no_llm, input={"question": QUESTION})  # the cached graph
        schemas = await client.assistants.get_schemas(no_llm)
        return first, again, schemas

    state, again, schemas = drive(langgraph_server, steps)
    assert "Janney" in state["answer"] and not state["abstained"]
    assert state["citations"] and state["citations"][0]["title"] == "Railway couplers"
    assert [t["node"] for t in state["trace"]] == FIXED_NODES
    assert again["answer"] == state["answer"]
    # the context a run may set: LangGraph Server filters a run's context by it, Studio shows it
    assert set(schemas["context_schema"]["properties"]) == {"run_id", "seed", "groups"}


def test_stream_yields_one_update_per_node(langgraph_server, sample_index):
    async def steps(client):
        no_llm = await assistant(client, "no-llm", "no-llm", sample_index)
        thread = await client.threads.create()
        parts = [
            part
            async for part in client.runs.stream(
                thread["thread_id"], no_llm, input={"question": QUESTION}, stream_mode=["updates"]
            )
        ]
        return parts, await client.threads.get_state(thread["thread_id"])

    parts, final = drive(langgraph_server, steps)
    updates = [p.data for p in parts if p.event == "updates"]
    assert all(len(update) == 1 for update in updates)
    assert [next(iter(update)) for update in updates] == FIXED_NODES
    assert [t["node"] for t in final["values"]["trace"]] == FIXED_NODES
    assert "Janney" in updates[-1]["answer"]["answer"]
    assert not any(p.event == "error" for p in parts)


def test_a_bad_pipeline_is_a_clear_error(langgraph_server, sample_index):
    async def steps(client):
        bad = await assistant(client, "bad", "no-such-config", sample_index)
        with pytest.raises(Exception) as failed:
            await client.runs.wait(None, bad, input={"question": QUESTION})
        return str(failed.value)

    message = drive(langgraph_server, steps)
    assert "ConfigError: config file not found: no-such-config (shipped configs: agent, " in message


def test_an_agent_runs(langgraph_server, sample_index, scripted_llm):
    async def steps(client):
        agent = await assistant(
            client, "agent", "agent-zeroshot", sample_index, "llm.backend=openai", f"llm.base_url={scripted_llm.url}"
        )
        return await client.runs.wait(None, agent, input={"question": QUESTION})

    state = drive(langgraph_server, steps)
    assert [s["action"] for s in state["agent_steps"]] == ["retrieve", "rerank", "grade", "answer"]
    assert "Eli Janney" in state["answer"] and state["citations"] and not state["abstained"]
    assert [t["node"] for t in state["trace"]].count("router") == 4


def test_an_agent_on_the_packaged_local_model_ends(langgraph_server, sample_index):
    """The real SmolLM2 through llama.cpp inside the server's worker thread: one decision, then the budget's
    forced end (an answer or an abstention)."""

    async def steps(client):
        agent = await assistant(
            client,
            "agent-local",
            "agent-zeroshot",
            sample_index,
            "graph.router.max_steps=1",
            "answer.method=extractive",
        )
        return await client.runs.wait(None, agent, input={"question": QUESTION})

    state = drive(langgraph_server, steps)
    assert 1 <= len(state["agent_steps"]) <= 2 and state["agent_steps"][-1]["action"] in ("answer", "abstain")
    assert state["answer"] and (state["abstained"] or state["citations"])
    assert state["usage"]["llm_calls"] >= 1


def test_approve_pauses_and_resumes_on_the_servers_checkpointer(langgraph_server, sample_index, scripted_llm):
    async def steps(client):
        approve = await assistant(
            client,
            "agent-approve",
            "agent-approve",
            sample_index,
            "llm.backend=openai",
            f"llm.base_url={scripted_llm.url}",
        )
        thread = (await client.threads.create())["thread_id"]
        state = await client.runs.wait(thread, approve, input={"question": QUESTION})
        waiting = await client.threads.get_state(thread)
        pauses = []
        answers = iter([{"decision": "edit", "arguments": {"query": "Janney coupler"}}])
        while "__interrupt__" in state and len(pauses) < 10:
            pauses.append(state["__interrupt__"][0]["value"])
            state = await client.runs.wait(thread, approve, command={"resume": next(answers, {"decision": "approve"})})
        # another run, rejected at its first pause: the agent decides again, and the run waits at its next pause
        other = (await client.threads.create())["thread_id"]
        await client.runs.wait(other, approve, input={"question": QUESTION})
        rejected = await client.runs.wait(
            other, approve, command={"resume": {"decision": "reject", "reason": "rerank first"}}
        )
        return waiting, pauses, state, await client.threads.get_state(thread), rejected

    waiting, pauses, state, final, rejected = drive(langgraph_server, steps)
    assert waiting["next"] == ["approve"]
    assert waiting["interrupts"][0]["value"]["action"] == "retrieve"
    assert [(p["step"], p["action"]) for p in pauses] == [(1, "retrieve"), (2, "rerank"), (3, "grade"), (4, "answer")]
    assert pauses[0]["args"] == {"query": "knuckle coupler patent"}
    assert "Eli Janney" in state["answer"] and state["citations"] and not state["abstained"]
    assert state["agent_steps"][0]["args"] == {"query": "Janney coupler"}
    assert [s["human"] for s in state["agent_steps"]] == [
        {"decision": "edit", "proposed": {"query": "knuckle coupler patent"}}
    ] + [{"decision": "approve"}] * 3
    assert final["next"] == [] and not final["interrupts"]
    assert rejected["__interrupt__"][0]["value"]["step"] == 2
    assert rejected["agent_steps"][0]["observation"] == "retrieve rejected by the reviewer: rerank first"


def test_a_chat_thread_keeps_the_turns(langgraph_server, sample_index):
    """The chat graph: each run sends only the new user message; the server's checkpointer keeps the thread's
    messages, so the follow-up is answered with the first turn; a fresh thread has none."""

    async def steps(client):
        chat = await client.assistants.create(
            graph_id="switchyard-chat",
            name="chat",
            config={"configurable": {"pipeline": "no-llm", "index_dir": str(sample_index)}},
        )
        chat_id = chat["assistant_id"]
        thread = (await client.threads.create())["thread_id"]
        first = await client.runs.wait(thread, chat_id, input={"messages": [{"role": "human", "content": QUESTION}]})
        parts = [
            part
            async for part in client.runs.stream(
                thread,
                chat_id,
                input={"messages": [{"role": "user", "content": "What year was that?"}]},
                stream_mode=["updates"],
                stream_subgraphs=True,
            )
        ]
        state = await client.threads.get_state(thread)
        fresh = (await client.threads.create())["thread_id"]
        alone = await client.runs.wait(
            fresh, chat_id, input={"messages": [{"role": "user", "content": "What year was that?"}]}
        )
        ended = (await client.threads.create())["thread_id"]
        with pytest.raises(Exception) as failed:
            await client.runs.wait(ended, chat_id, input={"messages": [{"role": "ai", "content": "Hello."}]})
        approve = await client.assistants.create(
            graph_id="switchyard-chat",
            name="chat-approve",
            config={"configurable": {"pipeline": "agent-approve", "index_dir": str(sample_index)}},
        )
        with pytest.raises(Exception) as refused:
            await client.runs.wait(
                None, approve["assistant_id"], input={"messages": [{"role": "user", "content": "x"}]}
            )
        return first, parts, state, alone, str(failed.value), str(refused.value)

    first, parts, state, alone, ended, refused = drive(langgraph_server, steps)
    reply = first["messages"][-1]
    assert reply["type"] == "ai" and "Eli Janney" in reply["content"]
    assert reply["response_metadata"]["citations"][0]["title"] == "Railway couplers"
    assert not reply["response_metadata"]["abstained"]
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "human", "ai"]
    assert messages[-1]["content"].startswith("1873") and messages[-1]["response_metadata"]["short_answer"] == "1873"
    assert "knuckle coupler" in messages[-1]["response_metadata"]["standalone"]
    # the pipeline's node updates stream from the subgraph, under the chat node's namespace
    inner = [next(iter(p.data)) for p in parts if p.event.startswith("updates|respond:")]
    assert inner[0] == "contextualize" and inner[-1] == "answer"
    assert not any(p.event == "error" for p in parts)
    assert "1873" not in alone["messages"][-1]["content"]
    assert "HistoryError: the messages must end with a user message" in ended
    assert "ConfigError: the chat graph does not run a pipeline that pauses for approval" in refused
