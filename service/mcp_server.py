"""The MCP server: Switchyard's retrieval and answers as Model Context Protocol tools and resources, for MCP hosts
(Claude Desktop, IDEs, agent frameworks). `create_mcp_server(registry)` builds one app over the same
`PipelineRegistry` the HTTP service uses; `switchyard mcp` serves it over stdio, the HTTP service at `/mcp`
(streamable HTTP).

Tools (input validated by the SDK with pydantic; results are structured content with an output schema):
- `search(query, collection?, k=5, where?)` -> `{collection, passages: [{doc_id, title, source, page, score, text}]}`,
  through `Pipeline.search` (what `ask` retrieves in its first round: the one retrieval path);
- `ask(question, pipeline?, collection?, where?)` -> `{short_answer, answer, evidence, abstained, citations: [{n,
  doc_id, title, source, page, text}]}`, through `Pipeline.aask` (the transport's event loop never blocks; a
  cancelled call stops its LLM work);
- `list_collections()` -> `{collections: [{name, documents, chunks}]}`.

Resources: every document, `switchyard://{collection}/documents/{doc_id}` (its text, rebuilt from its chunks);
listing them pages through the documents of every collection, `PAGE_SIZE` at a time.

Access: every tool and resource resolves its collection through `CollectionAccess` (service/access.py, the check the
HTTP routes use too) with the `Principal` of the request's `Caller` (stdio: the local user, everything; HTTP: the
principal `service.auth.BearerAuth` recorded, i.e. the shared token or an API key). A key sees only its collections
(another is "does not exist"), and every search, answer, listing, count and document read carries its access groups
down to the LanceDB queries.

Errors: our own errors (errors.SwitchyardError: an unknown collection or pipeline, a bad filter, an empty
question, ...) and invalid arguments reach the client as a tool error (`isError`) with one line; anything
unexpected as one line `internal error: TYPE: message`, its traceback in the server's log. A failed call never
ends the session.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ListResourcesResult, PaginatedRequestParams, Resource, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from switchyard.errors import CollectionNotFound, SwitchyardError, first_line
from switchyard.graphs.pipeline import Pipeline
from switchyard.graphs.results import AskResult
from switchyard.nodes.citations import Citation
from switchyard.service.access import CollectionAccess
from switchyard.service.auth import principal_of
from switchyard.service.keys import LOCAL, Principal
from switchyard.service.registry import PipelineRegistry
from switchyard.service.schemas import MAX_K

log = logging.getLogger("switchyard.mcp")

DOCUMENT_URI = "switchyard://{collection}/documents/{doc_id}"
PAGE_SIZE = 200  # documents per resources/list page
LOCAL_HOSTS = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
LOCAL_ORIGINS = [
    "http://127.0.0.1",
    "http://127.0.0.1:*",
    "http://localhost",
    "http://localhost:*",
    "http://[::1]",
    "http://[::1]:*",
]

# (pipeline, its name, question, where, principal) -> the `ask` result, reading what the principal may read; the HTTP
# service passes one that applies its limits
AskRunner = Callable[[Pipeline, str, str, str | None, Principal, list | None], Awaitable[AskResult]]


# -- who is asking, and what they may see ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who made a request: over stdio (or in-process: the local user who started the process), or over HTTP with
    the principal the service's auth recorded on the request (LOCAL when the server runs open)."""

    transport: Literal["stdio", "http"]
    principal: Principal = LOCAL


def caller_of(ctx: Context) -> Caller:
    try:
        return caller_from_request(ctx.request_context.request)
    except ValueError:  # no request context: called in-process
        return Caller("stdio")


def caller_from_request(request) -> Caller:
    """stdio messages come with no request; HTTP ones with the Starlette request they arrived in."""
    if request is None or not hasattr(request, "scope"):
        return Caller("stdio")
    return Caller("http", principal_of(request))


# -- what the tools return ------------------------------------------------------------------------------------------


class HistoryMessage(BaseModel):
    """One earlier turn of the conversation (an unknown role is refused with one line: switchyard.conversation)."""

    role: str = Field(description="user or assistant")
    content: str


class PassageOut(BaseModel):
    doc_id: str = Field(description="the document's id (read it as resource switchyard://COLLECTION/documents/ID)")
    title: str
    source: str = Field(description="the document's file path or URL")
    page: int | None = Field(description="first page of the passage (PDFs), else null")
    score: float = Field(description="retrieval score (higher is better; comparable within one search)")
    text: str


class SearchOut(BaseModel):
    collection: str
    passages: list[PassageOut] = Field(description="best first")


class AskOut(BaseModel):
    short_answer: str = Field(description="a name, number, date, yes/no or short phrase, only when grounded; else ''")
    answer: str = Field(description="the answer with [n] citation marks")
    evidence: str = Field(description="the passage sentences that support the short answer, with [n] marks")
    abstained: bool = Field(description="true when the documents do not answer the question")
    citations: list[Citation] = Field(description="passage [n] of the answer: its document and the passage text")


class CollectionOut(BaseModel):
    name: str
    documents: int
    chunks: int


class CollectionsOut(BaseModel):
    collections: list[CollectionOut]


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


# -- errors ---------------------------------------------------------------------------------------------------------


def _one_line_errors(tool: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Our errors become a tool error with their one line; anything else one line too, its traceback logged."""

    @functools.wraps(tool)
    async def wrapper(*args, **kwargs):
        try:
            return await tool(*args, **kwargs)
        except SwitchyardError as exc:
            raise ToolError(first_line(exc)) from None
        except Exception as exc:
            log.error("unexpected error in MCP tool %s", tool.__name__, exc_info=exc)
            raise ToolError(f"internal error: {type(exc).__name__}: {first_line(exc)}") from None

    return wrapper


def _validation_line(exc: ValidationError) -> str:
    """`k: Input should be greater than or equal to 1; question: Field required` from pydantic's many lines."""
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
    )


class SwitchyardMCP(MCPServer):
    """MCPServer with one-line argument errors and documents listed from the index, per caller."""

    def __init__(self, access: CollectionAccess, **kwargs):
        super().__init__(**kwargs)
        self.access = access

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if type(exc) is ToolError and isinstance(exc.__cause__, ValidationError):
                raise ToolError(
                    f"Error executing tool {name}: invalid arguments: {_validation_line(exc.__cause__)}"
                ) from exc.__cause__
            raise

    # the SDK lists only resources registered up front; documents come and go, so they are listed when asked
    async def _handle_list_resources(self, ctx, params: PaginatedRequestParams | None) -> ListResourcesResult:
        caller = caller_from_request(ctx.request)
        cursor = params.cursor if params else None
        offset = int(cursor) if cursor and cursor.isdigit() else 0
        if cursor and not cursor.isdigit():
            raise MCPError(code=INVALID_PARAMS, message=f"invalid cursor {cursor!r}")
        resources, more = await anyio.to_thread.run_sync(self._document_page, caller, offset)
        return ListResourcesResult(resources=resources, next_cursor=str(offset + PAGE_SIZE) if more else None)

    def _document_page(self, caller: Caller, offset: int) -> tuple[list[Resource], bool]:
        out: list[Resource] = []
        seen = 0
        for collection in self.access.visible(caller.principal):
            for doc in self.access.registry.stack(collection).store.list_documents(caller.principal.scope):
                if offset <= seen < offset + PAGE_SIZE:
                    out.append(
                        Resource(
                            uri=document_uri(collection, doc["doc_id"]),
                            name=doc["doc_id"],
                            title=doc["title"],
                            mime_type="text/plain",
                            description=f"{collection}: {doc['source']} ({doc['chunks']} chunks)",
                        )
                    )
                seen += 1
                if seen > offset + PAGE_SIZE:
                    return out, True
        return out, False


def document_uri(collection: str, doc_id: str) -> str:
    return DOCUMENT_URI.format(collection=quote(collection, safe=""), doc_id=quote(doc_id, safe=""))


def document_text(chunks) -> str:
    """A document's text from its chunks (in order), each overlap with the previous chunk kept once."""
    parts: list[str] = []
    end = None
    for chunk in chunks:
        if end is None or chunk.start_char >= end:
            parts.append(("\n" if parts else "") + chunk.text)
        elif chunk.end_char > end and chunk.end_char - chunk.start_char == len(chunk.text):
            parts.append(chunk.text[end - chunk.start_char :])
        elif chunk.end_char > end:  # offsets that do not match the text: keep the whole chunk
            parts.append("\n" + chunk.text)
        end = chunk.end_char if end is None else max(end, chunk.end_char)
    return "".join(parts)


# -- the app --------------------------------------------------------------------------------------------------------


def create_mcp_server(
    registry: PipelineRegistry, *, access: CollectionAccess | None = None, ask_runner: AskRunner | None = None
) -> SwitchyardMCP:
    """The MCP app over `registry`'s pipelines. `ask_runner` runs an `ask` (default: `Pipeline.aask`)."""
    access = access or CollectionAccess(registry)

    async def plain_ask(
        pipe: Pipeline, _name: str, question: str, where: str | None, principal: Principal, history: list | None
    ) -> AskResult:
        return await pipe.aask(question, where, history=history, groups=principal.scope)

    run_ask = ask_runner or plain_ask

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    server = SwitchyardMCP(
        access,
        name="switchyard",
        title="Switchyard",
        version="0.1.0",
        instructions="Search and question answering over the user's indexed documents. `search` returns ranked "
        "passages; `ask` answers with [n] citations of those passages; `list_collections` names the "
        "collections; each document is a resource, switchyard://COLLECTION/documents/DOC_ID.",
        log_level="WARNING",
    )
    root.handlers[:], root.level = handlers, level  # the SDK configures the root logger when built: undo that

    def pipeline_for(caller: Caller, name: str | None, collection: str | None) -> tuple[Pipeline, str, str]:
        """The named pipeline (default: the first) over `collection` (default: the pipeline's own), if visible."""
        name = access.pipeline_name(name)
        collection = collection or access.own_collection(name)
        return access.readable(caller.principal, name, collection), name, collection

    @server.tool(annotations=READ_ONLY)
    @_one_line_errors
    async def search(
        query: Annotated[str, Field(description="what to look for: a question or keywords")],
        ctx: Context,
        collection: Annotated[
            str | None,
            Field(description="collection to search (default: the default pipeline's own; see list_collections)"),
        ] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="passages to return")] = 5,
        where: Annotated[
            str | None,
            Field(
                description='metadata filter, e.g. "source~handbook and page=2" '
                "(clauses FIELD=V, FIELD!=V, FIELD~TEXT, page>=N ...)"
            ),
        ] = None,
    ) -> SearchOut:
        """Ranked passages of the indexed documents for a query: hybrid (BM25 + dense) retrieval, exactly what
        `ask` retrieves first. Each passage has its document id, title, source, page, score and text."""
        caller = caller_of(ctx)

        def run() -> SearchOut:
            pipe, _, name = pipeline_for(caller, None, collection)
            result = pipe.search(query, where=where, top_k=k, groups=caller.principal.scope)
            return SearchOut(
                collection=name,
                passages=[
                    PassageOut(doc_id=p.doc_id, title=p.title, source=p.source, page=p.page, score=p.score, text=p.text)
                    for p in result.passages
                ],
            )

        return await anyio.to_thread.run_sync(run)

    @server.tool(annotations=READ_ONLY)
    @_one_line_errors
    async def ask(
        question: Annotated[str, Field(description="the question")],
        ctx: Context,
        pipeline: Annotated[
            str | None, Field(description="pipeline (config) to answer with; default: the server's first")
        ] = None,
        collection: Annotated[
            str | None, Field(description="collection to answer from (default: the pipeline's own)")
        ] = None,
        where: Annotated[str | None, Field(description='metadata filter, e.g. "source~handbook"')] = None,
        history: Annotated[
            list[HistoryMessage] | None,
            Field(
                description="the conversation so far, oldest first, when the question is a follow-up "
                '("what year was that?"): [{"role": "user" | "assistant", "content": "..."}]'
            ),
        ] = None,
    ) -> AskOut:
        """Answer a question from the indexed documents, with [n] citations of the passages used: a short answer
        (when grounded), the answer, the supporting evidence, and the cited passages. `abstained` is true when the
        documents do not answer it."""
        caller = caller_of(ctx)
        pipe, name, _ = await anyio.to_thread.run_sync(pipeline_for, caller, pipeline, collection)
        turns = [m.model_dump() for m in history] if history else None
        result = await run_ask(pipe, name, question, where, caller.principal, turns)
        return AskOut(
            short_answer=result.short_answer,
            answer=result.answer,
            evidence=result.evidence,
            abstained=result.abstained,
            citations=result.citations,
        )

    @server.tool(annotations=READ_ONLY)
    @_one_line_errors
    async def list_collections(ctx: Context) -> CollectionsOut:
        """The collections of the index, with their numbers of documents and chunks."""
        caller = caller_of(ctx)

        def run() -> CollectionsOut:
            out = []
            for name in access.visible(caller.principal):
                store = registry.stack(name).store
                groups = caller.principal.scope
                out.append(
                    CollectionOut(name=name, documents=len(store.list_documents(groups)), chunks=store.count(groups))
                )
            return CollectionsOut(collections=out)

        return await anyio.to_thread.run_sync(run)

    @server.resource(
        DOCUMENT_URI,
        name="document",
        mime_type="text/plain",
        description="The text of one indexed document (its chunks joined in order).",
    )
    async def document(collection: str, doc_id: str, ctx: Context) -> str:
        caller = caller_of(ctx)

        def run() -> str:
            access.check(caller.principal, collection)
            chunks = registry.stack(collection).store.document_chunks(doc_id, caller.principal.scope)
            if not chunks:
                raise ResourceNotFoundError(f"no document {doc_id!r} in collection {collection!r}")
            return document_text(chunks)

        try:
            return await anyio.to_thread.run_sync(run)
        except CollectionNotFound as exc:
            raise ResourceNotFoundError(first_line(exc)) from None
        except SwitchyardError as exc:
            raise ResourceError(first_line(exc)) from None

    return server


def http_endpoint(server: SwitchyardMCP, *, local_only: bool) -> StreamableHTTPASGIApp:
    """The ASGI app of `/mcp` (streamable HTTP, stateless, JSON replies): any of several servers sharing an index
    can answer any request. `local_only`: accept only requests addressed to this machine (Host and Origin
    127.0.0.1/localhost), the DNS-rebinding protection an unauthenticated local server needs. Run
    `server.session_manager.run()` around serving (the app's lifespan)."""
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=local_only, allowed_hosts=LOCAL_HOSTS, allowed_origins=LOCAL_ORIGINS
    )
    server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security)
    return StreamableHTTPASGIApp(server.session_manager)
