"""The MCP server as an MCP host meets it: the SDK's own client (`ClientSession`) over stdio against a real
`cli.py mcp` subprocess, and over streamable HTTP against a real `cli.py serve` on 127.0.0.1 with a bearer token.

Both transports run the same checks (`check_session`): the tool listing, each tool, bad arguments (a tool error the
client sees, the session going on), the documents as resources. Access: a request without the token, or with a
wrong one, is refused; a key made by `cli.py keys create` sees only its own collections (the other tenant's is the
same tool error as a collection that does not exist).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT
from tests.service.conftest import running_server

QUESTION = "Who patented the knuckle coupler?"
MEMO = (
    "# Shunting memo\n\nThe hump yard at Kelvin Junction closes for rail grinding on the first Monday of March. "
    "During the closure, freight trains are sorted at the flat yard in Dunmore. The hump reopens on the Wednesday "
    "after the grinding train has left.\n"
)
TIME_LIMIT_S = 240


@pytest.fixture(scope="module")
def two_collections(tmp_path_factory, sample_index, embedder):
    """A copy of the sample index (collection `default`) with a second collection, `memos`, of one document."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    root = tmp_path_factory.mktemp("mcp")
    uri = root / "index"
    shutil.copytree(sample_index, uri)
    (root / "memos").mkdir()
    (root / "memos" / "memo.md").write_text(MEMO, encoding="utf-8")
    stack = RetrievalStack(load_config(None, [f"store.uri={uri}", "store.collection=memos"]), embedder=embedder)
    stack.ingestor(progress=False).run([root / "memos"])
    return uri


def run(check) -> None:
    """Run an async check, bounded in time; a failure inside the SDK's task groups is raised as itself."""

    async def bounded():
        with anyio.fail_after(TIME_LIMIT_S):
            await check()

    try:
        asyncio.run(bounded())
    except BaseExceptionGroup as group:
        failure: BaseException = group
        while isinstance(failure, BaseExceptionGroup) and len(failure.exceptions) == 1:
            failure = failure.exceptions[0]
        raise failure from None


def error_text(result) -> str:
    assert result.is_error, result
    assert result.structured_content is None
    return result.content[0].text


async def check_session(session: ClientSession) -> None:
    """What every transport must give an MCP host, over the sample corpus plus the `memos` collection."""
    await session.initialize()

    # the tool listing: three read-only tools, each with an input and an output schema
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"search", "ask", "list_collections"}
    assert set(tools["search"].input_schema["properties"]) == {"query", "collection", "k", "where"}
    assert tools["search"].input_schema["required"] == ["query"]
    assert {"question", "pipeline", "collection"} <= set(tools["ask"].input_schema["properties"])
    assert {"short_answer", "evidence", "citations"} <= set(tools["ask"].output_schema["properties"])
    assert all(tool.annotations.read_only_hint and tool.description for tool in tools.values())

    # list_collections
    listed = await session.call_tool("list_collections", {})
    assert not listed.is_error
    assert listed.structured_content == {
        "collections": [
            {"name": "default", "documents": 5, "chunks": 5},
            {"name": "memos", "documents": 1, "chunks": 1},
        ]
    }

    # search: the default collection, then another one, with a filter
    found = await session.call_tool("search", {"query": "knuckle coupler", "k": 2})
    assert not found.is_error, found.content
    body = found.structured_content
    assert body["collection"] == "default" and len(body["passages"]) == 2
    assert body["passages"][0]["title"] == "Railway couplers" and "Janney" in body["passages"][0]["text"]
    assert body["passages"][0]["score"] >= body["passages"][1]["score"]
    assert set(body["passages"][0]) == {"doc_id", "title", "source", "page", "score", "text"}
    memo = await session.call_tool("search", {"query": "rail grinding", "collection": "memos", "where": "source~memo"})
    assert [p["title"] for p in memo.structured_content["passages"]] == ["Shunting memo"]
    handbook = await session.call_tool("search", {"query": "blue flag", "where": "source~handbook", "k": 3})
    assert handbook.structured_content["passages"]
    assert all("handbook" in p["source"] for p in handbook.structured_content["passages"])

    # ask: the short answer, the evidence and the citations as structured content
    asked = await session.call_tool("ask", {"question": QUESTION})
    assert not asked.is_error, asked.content
    answer = asked.structured_content
    assert set(answer) == {"short_answer", "answer", "evidence", "abstained", "citations"}
    assert "Janney" in answer["short_answer"] and "[1]" in answer["evidence"] and not answer["abstained"]
    assert answer["citations"][0]["n"] == 1 and answer["citations"][0]["title"] == "Railway couplers"
    assert "Janney" in answer["citations"][0]["text"]
    other = await session.call_tool(
        "ask",
        {
            "question": "Where are freight trains sorted during the closure?",
            "pipeline": "no-llm",
            "collection": "memos",
        },
    )
    assert other.structured_content["short_answer"] == "Dunmore"
    assert [c["title"] for c in other.structured_content["citations"]] == ["Shunting memo"]

    # bad arguments: a tool error with one clear line, and the session goes on
    bad = {
        ("search", "k"): {"query": "coupler", "k": 0},
        ("search", "query: Field required"): {"k": 3},
        ("search", "unknown filter field 'colour'"): {"query": "coupler", "where": "colour=red"},
        ("search", "collection 'elsewhere' does not exist (collections: default, memos)"): {
            "query": "coupler",
            "collection": "elsewhere",
        },
        ("search", "the question is empty"): {"query": "  "},
        ("ask", "unknown pipeline 'oracle'; known pipelines: no-llm"): {"question": QUESTION, "pipeline": "oracle"},
        ("ask", "collection '../default' does not exist"): {"question": QUESTION, "collection": "../default"},
        ("ask", "question: Input should be a valid string"): {"question": 42},
        ("ask", "the question is empty"): {"question": ""},
    }
    for (tool, said), arguments in bad.items():
        text = error_text(await session.call_tool(tool, arguments))
        assert text.startswith(f"Error executing tool {tool}: ") and said in text, (arguments, text)
        assert "\n" not in text and "Traceback" not in text, text
    unknown = await session.call_tool("summarise", {"text": "x"})
    assert "Unknown tool: summarise" in error_text(unknown)
    assert not (await session.call_tool("list_collections", {})).is_error  # still serving

    # documents as resources
    resources = (await session.list_resources()).resources
    assert len(resources) == 6 and (await session.list_resources()).next_cursor is None
    uris = {str(r.uri): r for r in resources}
    couplers = next(r for r in resources if r.title == "Railway couplers")
    assert str(couplers.uri).startswith("switchyard://default/documents/couplers-")
    assert couplers.mime_type == "text/plain"
    text = (await session.read_resource(str(couplers.uri))).contents[0].text
    assert "patented\nby Eli Janney in 1873" in text
    memo_uri = next(uri for uri, r in uris.items() if r.title == "Shunting memo")
    assert memo_uri.startswith("switchyard://memos/documents/")
    assert "Kelvin Junction" in (await session.read_resource(memo_uri)).contents[0].text
    templates = (await session.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["switchyard://{collection}/documents/{doc_id}"]
    for uri, said in (
        ("switchyard://default/documents/no-such-doc", "no document 'no-such-doc'"),
        ("switchyard://default/documents/it's", 'no document "it\'s"'),
        ("switchyard://elsewhere/documents/couplers", "collection 'elsewhere' does not exist"),
    ):
        with pytest.raises(MCPError, match=said):
            await session.read_resource(uri)


def readme_host_config(index) -> tuple[str, list[str]]:
    """The command and arguments of README's MCP host configuration, with this checkout for /home/me/switchyard
    and `index` for its index."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"^```json\n(.*?)^```", readme, flags=re.S | re.M) if "mcpServers" in b)
    entry = json.loads(block)["mcpServers"]["switchyard"]

    def here(value: str) -> str:
        return value.replace("/home/me/switchyard/.switchyard/index", str(index)).replace(
            "/home/me/switchyard", str(ROOT)
        )

    command = here(entry["command"])
    assert command == str(ROOT / ".venv" / "bin" / "switchyard")  # the command setup.sh (or pip) installs
    if not Path(command).exists():  # a checkout without its own .venv (a git worktree): this interpreter's
        command = str(Path(sys.executable).parent / "switchyard")
    args = [here(arg) for arg in entry["args"]]
    assert args == ["mcp", "--index-dir", str(index)]
    return command, args


@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT_S + 60)
def test_stdio(two_collections, tmp_path):
    """`switchyard mcp` as an MCP host starts it, from README's host configuration (in another folder, as hosts do): a
    subprocess speaking MCP on its stdin/stdout. The no-LLM pipeline answers, so that no LLM is loaded."""
    command, args = readme_host_config(two_collections)
    env = {**os.environ, "SWITCHYARD_CACHE_DIR": str(tmp_path / "cache")}
    params = StdioServerParameters(command=command, args=[*args, "--config", "no-llm"], env=env, cwd=str(tmp_path))
    errors = tmp_path / "stderr.log"

    async def check():
        with errors.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120) as session,
            ):
                await check_session(session)

    run(check)
    log = errors.read_text()
    assert "switchyard: MCP server on stdio, pipelines no-llm" in log
    assert "Traceback" not in log
    assert not (tmp_path / "cache" / "errors.log").exists()


def test_stdio_bad_config_is_one_line(tmp_path):
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "mcp", "--config", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr


def mcp_http_client(token: str) -> httpx2.AsyncClient:
    """The HTTP client the SDK's transport is given (its own httpx2): how a client sends the bearer token."""
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120))


@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT_S + 120)
def test_streamable_http(two_collections, tmp_path):
    """`/mcp` on the HTTP service: the same checks with the service's bearer token, and without it, nothing."""
    with running_server(tmp_path, two_collections, "--config", "no-llm", token="mcp-s3cret") as srv:
        url = f"{srv.url}/mcp"

        async def check():
            async with (
                mcp_http_client("mcp-s3cret") as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120) as session,
            ):
                await check_session(session)

        run(check)

        # no token, or a wrong one: refused before the MCP server sees the request, for every method
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "0"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream"}
        for token in (None, "wrong"):
            with srv.client(token=token) as client:
                for method in ("POST", "GET", "DELETE"):
                    r = client.request(method, "/mcp", json=initialize, headers=accept)
                    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (token, method)

        async def refused():
            async with (
                mcp_http_client("wrong") as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write, read_timeout_seconds=30) as session,
            ):
                await session.initialize()

        with pytest.raises(MCPError, match="Server returned an error response"):  # how the SDK's client meets a 401
            run(refused)

        with srv.client() as client:  # the MCP requests are counted like every other route
            metrics = client.get("/metrics").text
        assert 'route="/mcp"' in metrics and 'status="401"' in metrics
        assert "mcp-s3cret" not in srv.output() and "Traceback" not in srv.output()


def create_key(index, name: str, *options: str) -> str:
    """A key made by the real `cli.py keys create`; the key is the first line it prints."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "keys", "create", name, "--index-dir", str(index), *options],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0].strip()


@pytest.mark.slow
@pytest.mark.timeout(TIME_LIMIT_S + 120)
def test_a_key_sees_only_its_collections_over_mcp(two_collections, tmp_path):
    """Through the SDK's client on `/mcp`: a key for `memos` lists, searches and reads `memos` only; the other
    collection is the same tool error as one that does not exist, and none of its documents is a resource."""
    index = tmp_path / "index"
    shutil.copytree(two_collections, index)
    memos_key = create_key(index, "memos-reader", "--collections", "memos")
    listed = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "list", "--json", "--index-dir", str(index)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    couplers = next(d["doc_id"] for d in json.loads(listed.stdout) if d["title"] == "Railway couplers")
    with running_server(tmp_path, index, "--config", "no-llm") as srv:

        async def check():
            async with (
                mcp_http_client(memos_key) as http,
                streamable_http_client(f"{srv.url}/mcp", http_client=http) as (read, write),
                ClientSession(read, write, read_timeout_seconds=120) as session,
            ):
                await session.initialize()
                listed = await session.call_tool("list_collections", {})
                assert [c["name"] for c in listed.structured_content["collections"]] == ["memos"]
                own = await session.call_tool("search", {"query": "rail grinding", "collection": "memos"})
                assert not own.is_error and "Kelvin Junction" in json.dumps(own.structured_content)
                other = error_text(
                    await session.call_tool("search", {"query": "knuckle coupler", "collection": "default"})
                )
                missing = error_text(
                    await session.call_tool("search", {"query": "knuckle coupler", "collection": "nope"})
                )
                assert other == missing.replace("nope", "default") and "Janney" not in other
                default_pipeline = await session.call_tool("ask", {"question": QUESTION})  # its collection: default
                assert default_pipeline.is_error and "Janney" not in error_text(default_pipeline)
                resources = (await session.list_resources()).resources
                assert resources and all(str(r.uri).startswith("switchyard://memos/") for r in resources)
                with pytest.raises(MCPError) as hidden:  # a real id of the other collection
                    await session.read_resource(f"switchyard://default/documents/{couplers}")
                with pytest.raises(MCPError) as unknown:
                    await session.read_resource("switchyard://nope/documents/x")
                assert "Janney" not in str(hidden.value)
                assert str(hidden.value).replace("default", "nope").replace(couplers, "x") == str(unknown.value)

        run(check)
        assert memos_key not in srv.output() and "Traceback" not in srv.output()


@pytest.mark.slow
def test_without_a_token_only_local_requests(sample_index, tmp_path):
    """A server without a token answers /mcp only for requests addressed to this machine (DNS rebinding)."""
    from fastapi.testclient import TestClient

    from switchyard.service.app import create_app
    from switchyard.service.settings import ServiceSettings

    settings = ServiceSettings(
        configs=("no-llm",),
        overrides=(f"store.uri={sample_index}",),
        warm_up=False,
        upload_dir=tmp_path / "uploads",
        api_token=None,
    )
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8000") as client:
        rebound = client.post("/mcp", json=ping, headers={**headers, "Host": "attacker.example"})
        assert (rebound.status_code, rebound.text) == (421, "Invalid Host header")
        foreign = client.post("/mcp", json=ping, headers={**headers, "Origin": "http://attacker.example"})
        assert (foreign.status_code, foreign.text) == (403, "Invalid Origin header")
        local = client.post("/mcp", json=ping, headers={**headers, "Origin": "http://localhost:8000"})
        assert local.status_code == 200 and local.json()["result"] == {}, local.text


def test_document_text_keeps_each_overlap_once():
    from switchyard.service.mcp_server import document_text

    text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota."
    spans = [(0, 37), (18, 53)]  # the second chunk repeats "Delta epsilon zeta."
    chunks = [SimpleNamespace(text=text[a:b], start_char=a, end_char=b) for a, b in spans]
    assert document_text(chunks) == text
    apart = [
        SimpleNamespace(text="One.", start_char=0, end_char=4),
        SimpleNamespace(text="Two.", start_char=6, end_char=10),
    ]
    assert document_text(apart) == "One.\nTwo."
    assert document_text([]) == ""


@pytest.mark.slow
def test_resources_page_through_every_collection(two_collections, monkeypatch):
    """Documents are listed a page at a time across collections (in-process: the page size is patched)."""
    from mcp import Client

    from switchyard.service import mcp_server
    from switchyard.service.registry import PipelineRegistry

    monkeypatch.setattr(mcp_server, "PAGE_SIZE", 4)
    server = mcp_server.create_mcp_server(PipelineRegistry(("no-llm",), (f"store.uri={two_collections}",)))

    async def check():
        async with Client(server) as client:
            first = await client.list_resources()
            assert len(first.resources) == 4 and first.next_cursor == "4"
            second = await client.list_resources(cursor=first.next_cursor)
            assert len(second.resources) == 2 and second.next_cursor is None
            uris = [str(r.uri) for r in first.resources + second.resources]
            assert len(set(uris)) == 6 and uris[-1].startswith("switchyard://memos/")
            for cursor in ("later", "-1"):
                with pytest.raises(MCPError, match=f"invalid cursor '{cursor}'"):
                    await client.list_resources(cursor=cursor)

    run(check)
