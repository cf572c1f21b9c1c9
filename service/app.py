"""The HTTP service: `create_app(ServiceSettings(...))` -> a FastAPI app over one or more pipelines.

Routes (JSON unless said otherwise; errors are JSON `{"detail": ...}` with a 4xx/5xx status, never a traceback), one
`APIRouter` per resource in service/routes/:
- `POST /v1/ask` `{question, pipeline?, collection?, where?}` -> the `ask --json` object.
- `POST /v1/ask/stream` -> Server-Sent Events, one per `Pipeline.stream` event (`event: <type>`, `data: <json>`),
  ending with `answer` (the full result) or `error`. A client that disconnects cancels its run.
- `POST /v1/search` `{query, pipeline?, collection?, where?, k?}` -> the `search --json` object.
- `POST /v1/chat/completions` -> OpenAI-compatible (see service/openai_compat.py).
- `GET /v1/pipelines`, `GET /v1/collections`, `POST /v1/collections/{name}/documents` (multipart; 202 + job),
  `GET /v1/jobs/{id}`, `GET /v1/collections/{name}/documents`, `DELETE /v1/collections/{name}/documents/{doc_id}`.
- A pipeline that pauses for approval (graph.router.approve): `POST /v1/ask` answers `{"status": "paused",
  "thread_id", "pending", "expires_at"}` (or the result with `"status": "done"`); `POST /v1/threads/{id}/resume`
  `{decision: approve|edit|reject, arguments?, reason?}` goes on to the next pause or the result;
  `GET /v1/threads/{id}` says where a paused run stands. Paused runs are kept beside the index
  (service/threads.py) and survive a restart; only the key that started one sees it (404 to others); an expired
  pause is 410, a second resume while one runs 409.
- `GET /healthz` (no auth), `GET /metrics` (Prometheus), `GET /docs` (OpenAPI), `GET /` (the web page).
- `/mcp`: the MCP server (service/mcp_server.py) over streamable HTTP, behind the same bearer auth.

Runs in flight are bounded (`max_in_flight`, and per key): beyond it a request gets 429 with `Retry-After`, never a
queue.

Access (service/keys.py, service/access.py): every route resolves its collection with the request's `Principal`
(service/dependencies.py); a collection the caller may not read answers exactly like one that does not exist (404),
and every run, search, listing and count carries the caller's access groups down to the LanceDB queries.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from switchyard import otel_sdk, tracing
from switchyard.extras import needs_extra
from switchyard.service import error_responses
from switchyard.service.audit import AuditMiddleware
from switchyard.service.auth import BearerAuth
from switchyard.service.core import Service
from switchyard.service.mcp_server import create_mcp_server, http_endpoint
from switchyard.service.metrics import MetricsMiddleware
from switchyard.service.routes import ROUTERS
from switchyard.service.settings import ServiceSettings

STATIC = Path(__file__).resolve().parent / "static"


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    service = Service(settings)
    # without a token, /mcp answers only requests addressed to this machine (DNS-rebinding protection)
    mcp = create_mcp_server(service.registry, access=service.access, ask_runner=service.bounded_ask)
    mcp_endpoint = http_endpoint(mcp, local_only=settings.api_token is None and not service.keys.active())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with mcp.session_manager.run():
            if settings.warm_up:
                await asyncio.to_thread(service.registry.warm_up)
            await asyncio.to_thread(service.jobs.recover)  # upload jobs a stopped server left unfinished
            yield
            # SIGTERM: the file in progress finishes its commits; unfinished jobs are resumed at the next start
            await asyncio.to_thread(service.jobs.shutdown)
            if service.threads is not None:
                service.threads.close()
            service.conversations.close()
            service.state.close()
            await asyncio.to_thread(otel_sdk.flush)

    app = FastAPI(
        title="Switchyard",
        version="0.1.0",
        lifespan=lifespan,
        description="Retrieval-augmented question answering: fixed pipeline and agent variants.",
    )
    app.state.service = service
    error_responses.install(app)
    for router in ROUTERS:
        app.include_router(router)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    # an ASGI app: every method, the SDK answers (Starlette's Route runs a non-function endpoint as an ASGI app;
    # add_route's annotation names request handlers only)
    app.add_route("/mcp", mcp_endpoint, include_in_schema=False)  # type: ignore[arg-type]
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(
        BearerAuth,
        token=settings.api_token,
        keys=service.keys,
        limiter=service.state.rate_limiter,
        token_with_keys=settings.token_with_keys,
    )
    app.add_middleware(AuditMiddleware, audit=service.state.audit)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)  # outermost: counts 401s too
    if otel_sdk.install() is not None:  # the server's own process: the SDK from OTEL_*, as the CLI does
        _instrument(app)
    return app


def _instrument(app: FastAPI) -> None:
    """A server span per request (FastAPI instrumentation, outside every middleware above) and its trace id in
    the `X-Trace-Id` response header. Imported only when tracing is on."""
    with needs_extra("otel", "traces of HTTP requests"):
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    app.add_middleware(TraceIdHeader)
    # one span per request, not one per body chunk of a stream
    FastAPIInstrumentor.instrument_app(app, tracer_provider=otel_sdk.provider(), exclude_spans=["send", "receive"])


class TraceIdHeader:
    """Adds `X-Trace-Id` (the current trace's id) to every HTTP response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        trace_id = tracing.current_trace_id() if scope["type"] == "http" else None
        if trace_id is None:
            await self.app(scope, receive, send)
            return

        async def with_header(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-trace-id", trace_id.encode())]
            await send(message)

        await self.app(scope, receive, with_header)
