"""The HTTP service: `create_app(ServiceSettings(...))` -> a FastAPI app over one or more pipelines.

Routes (JSON unless said otherwise; errors are JSON `{"detail": ...}` with a 4xx/5xx status, never a traceback):
- `POST /v1/ask` `{question, pipeline?, collection?, where?}` -> the `ask --json` object.
- `POST /v1/ask/stream` -> Server-Sent Events, one per `Pipeline.stream` event (`event: <type>`, `data: <json>`),
  ending with `answer` (the full result) or `error`. A client that disconnects cancels its run.
- `POST /v1/chat/completions` -> OpenAI-compatible (see service/openai_compat.py).
- `GET /v1/pipelines`, `GET /v1/collections`, `POST /v1/collections/{name}/documents` (multipart; 202 + job),
  `GET /v1/jobs/{id}`, `GET /v1/collections/{name}/documents`, `DELETE /v1/collections/{name}/documents/{doc_id}`.
- `GET /healthz` (no auth), `GET /metrics` (Prometheus), `GET /docs` (OpenAPI), `GET /` (the web page).
- `/mcp`: the MCP server (service/mcp_server.py) over streamable HTTP, behind the same bearer auth.

Runs in flight are bounded (`max_in_flight`): beyond it a request gets 429 with `Retry-After`, never a queue.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import FastAPI, File, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask

from configs.schema import StoreConfig
from errors import ServiceError, SwitchyardError, UnknownPipeline, first_line
from graphs.app import Pipeline
from graphs.results import Answer, AskResult, ErrorEvent
from llm import telemetry
from llm.context import RunContext
from service.auth import BearerAuth
from service.job_store import job_store_path
from service.jobs import IngestJobs, safe_name
from service.mcp_server import create_mcp_server, http_endpoint
from service.metrics import CONTENT_TYPE, MetricsMiddleware, ServiceMetrics
from service.openai_compat import ChatRequest, chat_completion, chat_stream, openai_error, question_of
from service.registry import PipelineRegistry
from service.schemas import (CollectionInfo, Deleted, DocumentInfo, Health, JobStatus, PipelineInfo,
                             UploadAccepted)
from service.settings import ServiceSettings

STATIC = Path(__file__).resolve().parent / "static"
log = logging.getLogger("switchyard.service")
RETRY_AFTER_S = 1


class AskRequest(BaseModel):
    question: str = Field(description="the question")
    pipeline: str | None = Field(None, description="a served pipeline's name (config file stem); default: first")
    collection: str | None = Field(None, description="collection to search; default: the pipeline's own")
    where: str | None = Field(None, description='metadata filter, e.g. "source~handbook and page=2"')


class Slot:
    """One run's place among those in flight; `release()` may be called more than once (stream end, response
    end), the place is given back once."""

    def __init__(self, service: "Service"):
        self._service = service
        self._released = threading.Event()

    def release(self) -> None:
        if not self._released.is_set():
            self._released.set()
            self._service._release()


class RunSlots:
    """At most `limit` runs in flight; `try_acquire` never waits (the caller answers 429 instead of queueing)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.active = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self.active >= self.limit:
                return False
            self.active += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.active -= 1


def status_of(exc: BaseException) -> int:
    """The HTTP status of a failed run, by the error's type: the caller's mistake (4xx), the model server's (502),
    anything unexpected 500."""
    return exc.http_status if isinstance(exc, SwitchyardError) else 500


class Service:
    """Everything the routes share: pipelines, jobs, metrics and the run slots (all safe across requests)."""

    def __init__(self, settings: ServiceSettings):
        self.settings = settings
        self.registry = PipelineRegistry(settings.configs, settings.overrides)
        store_uri = self.registry.configs[self.registry.default].store.uri  # where registry.stack ingests
        self.jobs = IngestJobs(settings.upload_dir, self.registry.stack,
                               job_store_path(store_uri, settings.upload_dir))
        self.metrics = ServiceMetrics()
        self.slots = RunSlots(settings.max_in_flight)

    def pipeline(self, name: str | None, collection: str | None, create: bool = False) -> Pipeline:
        """The named pipeline over `collection`; one that does not exist is a 404 unless `create` (an upload):
        pipelines are kept per collection, so a client cannot make the server build one for any name it likes."""
        if collection is not None:
            try:
                StoreConfig(collection=collection)
            except ValueError:
                raise ServiceError(400, f"invalid collection name {collection!r} (1-64 letters, digits, '_', '.', "
                                        "'-', starting with a letter or digit)") from None
            if not create and collection not in self.collections():
                raise ServiceError(404, f"collection {collection!r} does not exist (collections: "
                                        f"{', '.join(self.collections()) or 'none'})")
        try:
            return self.registry.get(name, collection)
        except UnknownPipeline as exc:
            raise ServiceError(exc.http_status, str(exc)) from None

    def collections(self) -> list[str]:
        return self.registry.get().resources.stack.store.collections()

    def check_question(self, question: str) -> None:
        if not question or not question.strip():
            raise ServiceError(400, "the question is empty")
        if len(question) > self.settings.max_question_chars:
            raise ServiceError(413, f"the question is longer than {self.settings.max_question_chars} characters")

    def acquire(self) -> "Slot":
        if not self.slots.try_acquire():
            self.metrics.rejected.labels("in_flight").inc()
            raise ServiceError(429, f"{self.slots.limit} runs are in flight; retry shortly",
                               {"Retry-After": str(RETRY_AFTER_S)})
        self.metrics.runs_in_flight.inc()
        return Slot(self)

    def _release(self) -> None:
        self.slots.release()
        self.metrics.runs_in_flight.dec()

    async def ask(self, pipe: Pipeline, name: str, question: str, where: str | None) -> AskResult:
        """One run with the request timeout; a timed-out run is cancelled (its LLM calls stop)."""
        try:
            result = await asyncio.wait_for(pipe.aask(question, where), self.settings.request_timeout_s)
        except asyncio.TimeoutError:
            raise ServiceError(504, f"the run timed out after {self.settings.request_timeout_s:g}s") from None
        except Exception as exc:
            raise ServiceError(status_of(exc), first_line(exc)) from None
        self.metrics.observe_run(name, result.usage.model_dump())
        return result

    async def bounded_ask(self, pipe: Pipeline, name: str, question: str, where: str | None) -> AskResult:
        """`ask` within the service's limits (question length, runs in flight, timeout), as `/v1/ask` runs it; the
        MCP tool `ask` goes through here."""
        self.check_question(question)
        slot = self.acquire()
        try:
            return await self.ask(pipe, name, question, where)
        finally:
            slot.release()

    async def events(self, pipe: Pipeline, name: str, question: str, where: str | None, slot: Slot):
        """The run's events; past the request timeout the run is cancelled (its LLM work stops) and ends with an
        `error` event. The slot is given back when the stream ends or the client goes away."""
        context = RunContext()
        timer = asyncio.get_running_loop().call_later(self.settings.request_timeout_s, context.cancelled.set)
        events = pipe.astream(question, where, context=context)
        try:
            async for event in events:
                if isinstance(event, ErrorEvent) and context.cancelled.is_set():
                    event = ErrorEvent(message=f"the run timed out after {self.settings.request_timeout_s:g}s")
                elif isinstance(event, Answer):
                    self.metrics.observe_run(name, event.result.usage.model_dump())
                yield event
        finally:
            timer.cancel()
            # a client that went away cancels this task, and anyio cancels every later await in it too: give the
            # place back first, then close the run (which sets its cancellation flag) shielded
            slot.release()
            with anyio.CancelScope(shield=True):
                await events.aclose()


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    service = Service(settings)
    # without a token, /mcp answers only requests addressed to this machine (DNS-rebinding protection)
    mcp = create_mcp_server(service.registry, ask_runner=service.bounded_ask)
    mcp_endpoint = http_endpoint(mcp, local_only=settings.api_token is None)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with mcp.session_manager.run():
            if settings.warm_up:
                await asyncio.to_thread(service.registry.warm_up)
            await asyncio.to_thread(service.jobs.recover)  # upload jobs a stopped server left unfinished
            yield
            # SIGTERM: the file in progress finishes its commits; unfinished jobs are resumed at the next start
            await asyncio.to_thread(service.jobs.shutdown)
            await asyncio.to_thread(telemetry.flush)

    app = FastAPI(title="Switchyard", version="0.1.0", lifespan=lifespan,
                  description="Retrieval-augmented question answering: fixed pipeline and agent variants.")
    app.state.service = service

    @app.exception_handler(ServiceError)
    async def service_error(_request: Request, exc: ServiceError):
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {first_line(exc)}"}, status_code=500)

    @app.get("/healthz")
    def healthz() -> Health:
        return {"status": "ok", "pipelines": service.registry.names()}

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/pipelines")
    def pipelines() -> list[PipelineInfo]:
        return service.registry.describe()

    @app.post("/v1/ask")
    async def ask(body: AskRequest) -> AskResult:
        service.check_question(body.question)
        pipe = service.pipeline(body.pipeline, body.collection)
        slot = service.acquire()
        try:
            return await service.ask(pipe, body.pipeline or service.registry.default, body.question, body.where)
        finally:
            slot.release()

    @app.post("/v1/ask/stream")
    async def ask_stream(body: AskRequest):
        service.check_question(body.question)
        pipe = service.pipeline(body.pipeline, body.collection)
        _check_ready(pipe, body.question)
        slot = service.acquire()

        async def sse():
            async for event in service.events(pipe, body.pipeline or service.registry.default, body.question,
                                              body.where, slot):
                yield {"event": event.event, "data": json.dumps(event.to_json(), ensure_ascii=False)}

        # the background task gives the place back even when the client left before the stream began
        return EventSourceResponse(sse(), ping=15, background=BackgroundTask(slot.release))

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest):
        name = body.model or service.registry.default
        try:
            question = question_of(body)
            service.check_question(question)
            pipe = service.pipeline(name, body.collection)
            _check_ready(pipe, question)
            slot = service.acquire()
        except ServiceError as exc:
            return openai_error(exc.status, exc.message, exc.headers)
        if body.stream:
            events = service.events(pipe, name, question, None, slot)
            return EventSourceResponse(chat_stream(events, name), ping=15, background=BackgroundTask(slot.release))
        try:
            result = await service.ask(pipe, name, question, None)
        except ServiceError as exc:
            return openai_error(exc.status, exc.message)
        finally:
            slot.release()
        return chat_completion(result, name)

    @app.get("/v1/collections")
    def collections() -> list[CollectionInfo]:
        return [{"name": name, "chunks": service.registry.stack(name).store.count()}
                for name in service.collections()]

    @app.get("/v1/collections/{name}/documents")
    def documents(name: str) -> list[DocumentInfo]:
        store = _existing_store(service, name)
        return store.list_documents()

    @app.delete("/v1/collections/{name}/documents/{doc_id}")
    def delete_document(name: str, doc_id: str) -> Deleted:
        store = _existing_store(service, name)
        removed = store.delete_documents([doc_id])
        if not removed:
            raise ServiceError(404, f"no document {doc_id!r} in collection {name!r}")
        return {"deleted": doc_id, "chunks": removed}

    @app.post("/v1/collections/{name}/documents", status_code=202)
    async def upload(name: str, files: list[UploadFile] = File(...)) -> UploadAccepted:
        service.pipeline(None, name, create=True)  # validates the collection name
        if len(files) > settings.max_upload_files:
            raise ServiceError(413, f"at most {settings.max_upload_files} files per upload")
        staged = service.jobs.staging()
        names: list[str] = []
        try:
            for upload_file in files:
                stored = _unique(safe_name(upload_file.filename), names)
                size = 0
                with (staged / stored).open("wb") as out:
                    while chunk := await upload_file.read(1 << 20):
                        size += len(chunk)
                        if size > settings.max_upload_bytes:
                            raise ServiceError(413, f"{upload_file.filename!r} is larger than "
                                                    f"{settings.max_upload_bytes} bytes")
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())  # on disk before the job is recorded: an accepted upload is never lost
                names.append(stored)
            job = await anyio.to_thread.run_sync(service.jobs.submit, name, staged, names)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        return {"job_id": job.id, "status_url": f"/v1/jobs/{job.id}", "files": names}

    @app.get("/v1/jobs/{job_id}")
    def job(job_id: str) -> JobStatus:
        found = service.jobs.get(job_id)
        if found is None:
            raise ServiceError(404, f"no job {job_id!r}")
        return found

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.add_route("/mcp", mcp_endpoint, include_in_schema=False)  # an ASGI app: every method, the SDK answers
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BearerAuth, token=settings.api_token)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)  # outermost: counts 401s too
    if telemetry.provider() is not None:
        _instrument(app)
    return app


def _instrument(app: FastAPI) -> None:
    """A server span per request (FastAPI instrumentation, outside every middleware above) and its trace id in
    the `X-Trace-Id` response header. Imported only when tracing is on."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    app.add_middleware(TraceIdHeader)
    # one span per request, not one per body chunk of a stream
    FastAPIInstrumentor.instrument_app(app, tracer_provider=telemetry.provider(), exclude_spans=["send", "receive"])


class TraceIdHeader:
    """Adds `X-Trace-Id` (the current trace's id) to every HTTP response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        trace_id = telemetry.current_trace_id() if scope["type"] == "http" else None
        if trace_id is None:
            await self.app(scope, receive, send)
            return

        async def with_header(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-trace-id", trace_id.encode())]
            await send(message)

        await self.app(scope, receive, with_header)


def _check_ready(pipe: Pipeline, question: str) -> None:
    """A stream's errors that are the caller's (empty or missing collection) as a 4xx before the stream starts."""
    try:
        pipe.checked_question(question)
    except Exception as exc:
        raise ServiceError(status_of(exc), first_line(exc)) from None


def _existing_store(service: Service, name: str):
    store = service.pipeline(None, name).resources.stack.store
    if not store.exists():
        raise ServiceError(404, f"collection {name!r} does not exist")
    return store


def _unique(name: str, taken: list[str]) -> str:
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    candidate, i = name, 1
    while candidate in taken:
        i += 1
        candidate = f"{stem}-{i}{dot}{ext}"
    return candidate
