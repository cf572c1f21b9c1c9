"""The MCP tool `ask` in a conversation: its optional `history` (the earlier turns) answers a follow-up question that
alone is not answered; history that does not parse is a one-line tool error and the session goes on. Through the
SDK's own client: in-process against the plain server and the HTTP service's (its limits, `Service.bounded_ask`), and
over stdio against a real `cli.py mcp` subprocess. The no-LLM pipeline answers."""

from __future__ import annotations

import os
import sys

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from tests.conftest import ROOT
from tests.service.test_mcp import TIME_LIMIT_S, error_text, run

QUESTION = "Who patented the knuckle coupler?"
FOLLOW_UP = "What year was that?"
HISTORY = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "Eli Janney [1]"}]


async def check_conversation(session) -> None:
    """What an MCP host sees of `ask` with `history`, whatever the transport."""
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    history = tools["ask"].input_schema["properties"]["history"]
    assert "history" not in tools["ask"].input_schema.get("required", [])
    assert "follow-up" in history["description"]

    alone = await session.call_tool("ask", {"question": FOLLOW_UP})
    assert not alone.is_error and alone.structured_content["abstained"]

    asked = await session.call_tool("ask", {"question": FOLLOW_UP, "history": HISTORY})
    assert not asked.is_error, asked.content
    answer = asked.structured_content
    assert answer["short_answer"] == "1873" and not answer["abstained"]
    assert answer["citations"][0]["title"] == "Railway couplers"

    with_system = [{"role": "system", "content": "be brief"}, *HISTORY]
    assert (await session.call_tool("ask", {"question": FOLLOW_UP, "history": with_system})).structured_content[
        "short_answer"
    ] == "1873"

    bad = {
        "unknown role 'wizard'": [{"role": "wizard", "content": QUESTION}],
        "history message 0 (user) is empty": [{"role": "user", "content": "  "}],
        "history: Input should be a valid list": "Who patented the knuckle coupler?",
        "history.0.content: Field required": [{"role": "user"}],
    }
    for said, history in bad.items():
        text = error_text(await session.call_tool("ask", {"question": FOLLOW_UP, "history": history}))
        assert text.startswith("Error executing tool ask: ") and said in text, (history, text)
        assert "\n" not in text and "Traceback" not in text, text
    # the session goes on
    again = await session.call_tool("ask", {"question": FOLLOW_UP, "history": HISTORY})
    assert again.structured_content["short_answer"] == "1873"


@pytest.fixture
def registry(sample_index, embedder):
    from switchyard.service.registry import PipelineRegistry

    registry = PipelineRegistry(("no-llm",), (f"store.uri={sample_index}",))
    registry.models.provide(registry.configs["no-llm"].embedding, embedder)
    return registry


def test_in_process(registry):
    from switchyard.service.mcp_server import create_mcp_server

    server = create_mcp_server(registry)

    async def check():
        async with Client(server) as client:
            await check_conversation(client)

    run(check)


def test_in_process_through_the_service_limits(index_copy, embedder, tmp_path):
    """The HTTP service's MCP server runs `ask` through `Service.bounded_ask` (question length, runs in flight)."""
    from switchyard.service.core import Service
    from switchyard.service.mcp_server import create_mcp_server
    from switchyard.service.settings import ServiceSettings

    settings = ServiceSettings(
        configs=("no-llm",),
        overrides=(f"store.uri={index_copy}",),
        warm_up=False,
        upload_dir=tmp_path / "uploads",
        api_token=None,
    )
    service = Service(settings)
    service.registry.models.provide(service.registry.configs["no-llm"].embedding, embedder)
    server = create_mcp_server(service.registry, access=service.access, ask_runner=service.bounded_ask)

    async def check():
        async with Client(server) as client:
            await check_conversation(client)

    try:
        run(check)
    finally:
        service.jobs.shutdown()
        service.conversations.close()


@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT_S + 60)
def test_stdio(index_copy, tmp_path):
    """`cli.py mcp` as an MCP host starts it: the same checks over stdio."""
    env = {**os.environ, "SWITCHYARD_CACHE_DIR": str(tmp_path / "cache")}
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "cli.py"), "mcp", "--index-dir", str(index_copy), "--config", "no-llm"],
        env=env,
        cwd=str(tmp_path),
    )
    errors = tmp_path / "stderr.log"

    async def check():
        with errors.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120) as session,
            ):
                await session.initialize()
                await check_conversation(session)

    run(check)
    assert "Traceback" not in errors.read_text()
