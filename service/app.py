"""The HTTP service: `create_app(ServiceSettings(...))` -> a FastAPI app over one or more pipelines.

Routes (JSON unless said otherwise; errors are JSON `{"detail": ...}` with a 4xx/5xx status, never a traceback):
- `POST /v1/ask` `{question, pipeline?, collection?, where?}` -> the `ask --json` object.
- `POST /v1/ask/stream` -> Server-Sent Events, one per `Pipeline.stream` event (`event: <type>`, `data: <json>`),
  ending with `answer` (the full result) or `error`. A client that disconnects cancels its run.
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

Access (service/keys.py): every route resolves its collection through `Service.readable` (or `writable`) with the
request's `Principal`; a collection the caller may not read answers exactly like one that does not exist (404), and
every run, listing and count carries the caller's access groups down to the LanceDB queries.
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
from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask

from switchyard.configs.schema import StoreConfig
from switchyard.errors import AccessError, ApprovalError, ServiceError, SwitchyardError, UnknownPipeline, first_line
from switchyard.graphs.app import Pipeline
from switchyard.graphs.results import Answer, AskResult, ErrorEvent, Paused
from switchyard import otel_sdk
from switchyard.extras import needs_extra
from switchyard.llm import telemetry
from switchyard.llm.context import RunContext
from switchyard.retrievers.filters import parse_labels
from switchyard.service.audit import AuditLog, AuditMiddleware, note
from switchyard.service.auth import BearerAuth, principal_of
from switchyard.service.job_store import job_store_path
from switchyard.service.keys import LOCAL, KeyRuns, KeyStore, Principal, keys_path
from switchyard.service.jobs import IngestJobs, safe_name
from switchyard.nodes.approve import Approval, checked_arguments
from switchyard.service.mcp_server import create_mcp_server, http_endpoint
from switchyard.service.metrics import CONTENT_TYPE, MetricsMiddleware, ServiceMetrics
from switchyard.service.openai_compat import ChatRequest, chat_completion, chat_stream, openai_error, question_of
from switchyard.service.registry import PipelineRegistry
from switchyard.service.schemas import (CollectionInfo, Deleted, DocumentInfo, Health, JobStatus, PipelineInfo, ThreadDone,
                             ThreadStatus, UploadAccepted)
from switchyard.service.settings import ServiceSettings
from switchyard.service.threads import PausedRuns, Thread, threads_path

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

    def __init__(self, service: "Service", principal: Principal):
        self._service = service
        self._principal = principal
        self._released = threading.Event()
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released.is_set():
                return
            self._released.set()
        self._service._release(self._principal)


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
        self.key_runs = KeyRuns()
        self.keys = KeyStore(keys_path(store_uri, settings.upload_dir))
        # paused runs (graph.router.approve) beside the index; no file unless a served pipeline pauses
        self.threads = (PausedRuns(threads_path(store_uri, settings.upload_dir),
                                   stale_after_s=2 * settings.request_timeout_s)
                        if self.registry.pauses() else None)
        if self.threads is not None:
            self.registry.checkpointer = self.threads.checkpointer

    def pipeline(self, principal: Principal, name: str | None, collection: str | None,
                 create: bool = False) -> Pipeline:
        """The named pipeline over `collection` (default: the pipeline's own) if `principal` may read it; a
        collection that does not exist is a 404 unless `create` (an upload): pipelines are kept per collection, so
        a client cannot make the server build one for any name it likes. A collection the principal may not read
        is the same 404 as one that does not exist."""
        if name is not None and name not in self.registry.configs:
            raise ServiceError(404, str(UnknownPipeline(name, self.registry.names())))
        given = collection is not None
        collection = collection or self.registry.configs[name or self.registry.default].store.collection
        try:
            StoreConfig(collection=collection)
        except ValueError:
            raise ServiceError(400, f"invalid collection name {collection!r} (1-64 letters, digits, '_', '.', "
                                    "'-', starting with a letter or digit)") from None
        if not principal.can_read(collection) or \
                (not create and (given or principal.restricted) and collection not in self.collections()):
            raise self.missing(principal, collection)
        return self.registry.get(name, collection)

    def missing(self, principal: Principal, collection: str) -> ServiceError:
        """The 404 of a collection that does not exist or that `principal` may not read (the same words)."""
        return ServiceError(404, f"collection {collection!r} does not exist (collections: "
                                 f"{', '.join(self.collections(principal)) or 'none'})")

    def collections(self, principal: Principal = LOCAL) -> list[str]:
        """The collections of the index that `principal` may read."""
        names = self.registry.get().resources.stack.store.collections()
        return [n for n in names if principal.can_read(n)]

    def existing_store(self, principal: Principal, name: str, write: bool = False):
        """The store of an existing collection `principal` may read (404 otherwise) and, with `write`, change
        (403 otherwise)."""
        store = self.pipeline(principal, None, name).resources.stack.store
        if not store.exists():
            raise self.missing(principal, name)
        if write and not principal.can_write(name):
            raise ServiceError(403, f"key {principal.name!r} may not change collection {name!r} (needs --write)")
        return store

    def check_question(self, question: str) -> None:
        if not question or not question.strip():
            raise ServiceError(400, "the question is empty")
        if len(question) > self.settings.max_question_chars:
            raise ServiceError(413, f"the question is longer than {self.settings.max_question_chars} characters")

    def acquire(self, principal: Principal) -> "Slot":
        """A place among the runs in flight, of the server and of the principal's key (429 beyond either)."""
        limit = principal.max_in_flight
        if limit and not self.key_runs.try_acquire(principal.name, limit):
            self.metrics.rejected.labels("key_in_flight").inc()
            raise ServiceError(429, f"key {principal.name!r} has {limit} runs in flight; retry shortly",
                               {"Retry-After": str(RETRY_AFTER_S)})
        if not self.slots.try_acquire():
            if limit:
                self.key_runs.release(principal.name)
            self.metrics.rejected.labels("in_flight").inc()
            raise ServiceError(429, f"{self.slots.limit} runs are in flight; retry shortly",
                               {"Retry-After": str(RETRY_AFTER_S)})
        self.metrics.runs_in_flight.inc()
        return Slot(self, principal)

    def _release(self, principal: Principal) -> None:
        self.slots.release()
        if principal.max_in_flight:
            self.key_runs.release(principal.name)
        self.metrics.runs_in_flight.dec()

    async def ask(self, pipe: Pipeline, name: str, question: str, where: str | None,
                  principal: Principal) -> AskResult:
        """One run with the request timeout, reading what `principal` may read; a timed-out run is cancelled (its
        LLM calls stop)."""
        try:
            result = await asyncio.wait_for(pipe.aask(question, where, groups=principal.scope),
                                            self.settings.request_timeout_s)
        except asyncio.TimeoutError:
            raise ServiceError(504, f"the run timed out after {self.settings.request_timeout_s:g}s") from None
        except Exception as exc:
            raise ServiceError(status_of(exc), first_line(exc)) from None
        self.metrics.observe_run(name, result.usage.model_dump())
        return result

    async def bounded_ask(self, pipe: Pipeline, name: str, question: str, where: str | None,
                          principal: Principal) -> AskResult:
        """`ask` within the service's limits (question length, runs in flight, timeout), as `/v1/ask` runs it; the
        MCP tool `ask` goes through here."""
        self.check_question(question)
        slot = self.acquire(principal)
        try:
            return await self.ask(pipe, name, question, where, principal)
        finally:
            slot.release()

    # -- a human in the loop (graph.router.approve) -----------------------------------------------------------
    async def start_thread(self, pipe: Pipeline, name: str, question: str, where: str | None,
                           principal: Principal) -> Paused | ThreadDone:
        """Run until the first pause (recorded as the principal's thread) or the answer."""
        context = RunContext(groups=principal.scope)
        try:
            outcome = await self._pausing(lambda: pipe.start(question, where, context=context), context, name)
        except ServiceError:
            pipe.forget(context.run_id)
            raise
        if isinstance(outcome, Paused):
            self.threads.add(outcome.thread_id, principal.name, name, pipe.resources.stack.collection,
                             outcome.expires_at.timestamp())
            return outcome
        return ThreadDone(**dict(outcome), thread_id=context.run_id)

    def thread(self, principal: Principal, thread_id: str) -> tuple[Thread, Pipeline]:
        """The principal's own thread and its pipeline; 404 for one that does not exist or is another's."""
        thread = self.threads.get(thread_id) if self.threads is not None else None
        if thread is None or thread.owner != principal.name or not principal.can_read(thread.collection):
            raise ServiceError(404, f"no paused run {thread_id!r}")
        return thread, self.pipeline(principal, thread.pipeline, thread.collection)

    def check_expiry(self, thread: Thread) -> None:
        """410 for a pause left unanswered past its expiry (its checkpoints are deleted the first time)."""
        if not thread.expired():
            return
        if thread.state != "expired":
            self.threads.finish(thread.id, "expired")
        raise ServiceError(410, f"the pause of run {thread.id!r} expired (graph.router.approve_timeout_s); "
                                "it cannot be resumed")

    async def resume_thread(self, principal: Principal, thread_id: str, approval: Approval) -> Paused | ThreadDone:
        """Answer a paused run: 404 (not the principal's), 410 (expired), 409 (being resumed or finished), 422
        (an edit the action cannot take; the run stays paused), else its next pause or its answer."""
        thread, pipe = self.thread(principal, thread_id)
        self.check_expiry(thread)
        if thread.state != "paused":
            raise ServiceError(409, f"run {thread_id!r} is {_STATES[thread.state]}; there is nothing to resume")
        if approval.decision == "edit":
            paused = pipe.pending(thread_id)
            try:
                checked_arguments(paused.pending.action if paused else "", approval.arguments)
            except ApprovalError as exc:
                raise ServiceError(422, str(exc)) from None
        slot = self.acquire(principal)
        try:
            if not self.threads.claim(thread_id):
                raise ServiceError(409, f"run {thread_id!r} is being resumed by another request, or its pause has "
                                        "just expired")
            context = RunContext(run_id=thread_id, groups=principal.scope)
            try:
                outcome = await self._pausing(lambda: pipe.resume(thread_id, approval, context=context), context,
                                              thread.pipeline)
            except ServiceError as exc:
                self.threads.finish(thread_id, "expired" if exc.status == 410 else "failed")
                raise
        finally:
            slot.release()
        if isinstance(outcome, Paused):
            self.threads.paused(thread_id, outcome.expires_at.timestamp())
            return outcome
        self.threads.finish(thread_id, "done")
        return ThreadDone(**dict(outcome), thread_id=thread_id)

    async def _pausing(self, run, context: RunContext, name: str) -> Paused | AskResult:
        """`run()` (a start or resume, synchronous: the checkpointer is) in a thread, with the request timeout."""
        try:
            outcome = await asyncio.wait_for(asyncio.to_thread(run), self.settings.request_timeout_s)
        except asyncio.TimeoutError:
            context.cancelled.set()
            raise ServiceError(504, f"the run timed out after {self.settings.request_timeout_s:g}s") from None
        except Exception as exc:
            raise ServiceError(status_of(exc), first_line(exc)) from None
        if isinstance(outcome, AskResult):
            self.metrics.observe_run(name, outcome.usage.model_dump())
        return outcome

    async def events(self, pipe: Pipeline, name: str, question: str, where: str | None, slot: Slot,
                     principal: Principal):
        """The run's events; past the request timeout the run is cancelled (its LLM work stops) and ends with an
        `error` event. The slot is given back when the stream ends or the client goes away."""
        context = RunContext(groups=principal.scope)
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


_STATES = {"running": "being resumed by another request", "done": "finished", "failed": "finished (it failed)",
           "expired": "expired"}


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    service = Service(settings)
    # without a token, /mcp answers only requests addressed to this machine (DNS-rebinding protection)
    mcp = create_mcp_server(service.registry, ask_runner=service.bounded_ask)
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
            await asyncio.to_thread(otel_sdk.flush)

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
    def metrics(request: Request) -> Response:
        _admin(principal_of(request), "the metrics")
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/pipelines")
    def pipelines() -> list[PipelineInfo]:
        return service.registry.describe()

    @app.post("/v1/ask")
    async def ask(body: AskRequest, request: Request) -> AskResult | Paused | ThreadDone:
        principal = principal_of(request)
        note(request, body.collection, body.question)
        service.check_question(body.question)
        pipe = service.pipeline(principal, body.pipeline, body.collection)
        note(request, pipe.resources.stack.collection)
        name = body.pipeline or service.registry.default
        slot = service.acquire(principal)
        try:
            if pipe.pauses:
                return await service.start_thread(pipe, name, body.question, body.where, principal)
            return await service.ask(pipe, name, body.question, body.where, principal)
        finally:
            slot.release()

    @app.post("/v1/threads/{thread_id}/resume")
    async def resume(thread_id: str, body: Approval, request: Request) -> Paused | ThreadDone:
        """Answer a paused run (graph.router.approve): approve its pending action, edit its arguments or reject
        it; the reply is the next pause or the result."""
        return await service.resume_thread(principal_of(request), thread_id, body)

    @app.get("/v1/threads/{thread_id}")
    def thread_status(thread_id: str, request: Request) -> ThreadStatus:
        thread, pipe = service.thread(principal_of(request), thread_id)
        if thread.expired():
            return {"thread_id": thread_id, "status": "expired"}
        paused = pipe.pending(thread_id) if thread.state == "paused" else None
        return {"thread_id": thread_id, "status": thread.state, "pending": paused and paused.pending,
                "expires_at": paused and paused.expires_at}

    @app.post("/v1/ask/stream")
    async def ask_stream(body: AskRequest, request: Request):
        principal = principal_of(request)
        note(request, body.collection, body.question)
        service.check_question(body.question)
        pipe = service.pipeline(principal, body.pipeline, body.collection)
        note(request, pipe.resources.stack.collection)
        _check_ready(pipe, body.question)
        _unattended(pipe, body.pipeline or service.registry.default)
        slot = service.acquire(principal)

        async def sse():
            async for event in service.events(pipe, body.pipeline or service.registry.default, body.question,
                                              body.where, slot, principal):
                yield {"event": event.event, "data": json.dumps(event.to_json(), ensure_ascii=False)}

        # the background task gives the place back even when the client left before the stream began
        return EventSourceResponse(sse(), ping=15, background=BackgroundTask(slot.release))

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest, request: Request):
        principal = principal_of(request)
        name = body.model or service.registry.default
        try:
            question = question_of(body)
            note(request, body.collection, question)
            service.check_question(question)
            pipe = service.pipeline(principal, name, body.collection)
            note(request, pipe.resources.stack.collection)
            _check_ready(pipe, question)
            _unattended(pipe, name)
            slot = service.acquire(principal)
        except ServiceError as exc:
            return openai_error(exc.status, exc.message, exc.headers)
        if body.stream:
            events = service.events(pipe, name, question, None, slot, principal)
            return EventSourceResponse(chat_stream(events, name), ping=15, background=BackgroundTask(slot.release))
        try:
            result = await service.ask(pipe, name, question, None, principal)
        except ServiceError as exc:
            return openai_error(exc.status, exc.message)
        finally:
            slot.release()
        return chat_completion(result, name)

    @app.get("/v1/collections")
    def collections(request: Request) -> list[CollectionInfo]:
        principal = principal_of(request)
        return [{"name": name, "chunks": service.registry.stack(name).store.count(principal.scope)}
                for name in service.collections(principal)]

    @app.get("/v1/collections/{name}/documents")
    def documents(name: str, request: Request) -> list[DocumentInfo]:
        principal = principal_of(request)
        note(request, name)
        return service.existing_store(principal, name).list_documents(principal.scope)

    @app.delete("/v1/collections/{name}/documents/{doc_id}")
    def delete_document(name: str, doc_id: str, request: Request) -> Deleted:
        principal = principal_of(request)
        note(request, name)
        store = service.existing_store(principal, name, write=True)
        removed = store.delete_documents([doc_id], principal.scope)
        if not removed:
            raise ServiceError(404, f"no document {doc_id!r} in collection {name!r}")
        return {"deleted": doc_id, "chunks": removed}

    @app.post("/v1/collections/{name}/documents", status_code=202)
    async def upload(name: str, request: Request, files: list[UploadFile] = File(...),
                     acl: str | None = Form(None, description="access labels of the uploaded documents, "
                                                               "e.g. 'hr,finance'")) -> UploadAccepted:
        principal = principal_of(request)
        note(request, name)
        service.pipeline(principal, None, name, create=True)  # validates the name; 404 if not the caller's
        if name not in service.collections():
            _admin(principal, f"creating collection {name!r}")
        elif not principal.can_write(name):
            raise ServiceError(403, f"key {principal.name!r} may not change collection {name!r} (needs --write)")
        try:
            labels = parse_labels(acl)
        except AccessError as exc:
            raise ServiceError(400, str(exc)) from None
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
            job = await anyio.to_thread.run_sync(service.jobs.submit, name, staged, names, labels)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        return {"job_id": job.id, "status_url": f"/v1/jobs/{job.id}", "files": names}

    @app.get("/v1/jobs/{job_id}")
    def job(job_id: str, request: Request) -> JobStatus:
        found = service.jobs.get(job_id)
        if found is None or not principal_of(request).can_read(found["collection"]):
            raise ServiceError(404, f"no job {job_id!r}")
        note(request, found["collection"])
        return found

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.add_route("/mcp", mcp_endpoint, include_in_schema=False)  # an ASGI app: every method, the SDK answers
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BearerAuth, token=settings.api_token, keys=service.keys)
    app.add_middleware(AuditMiddleware, audit=AuditLog(settings.audit_log, settings.audit_questions))
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)  # outermost: counts 401s too
    if otel_sdk.install() is not None:  # the server's own process: the SDK from OTEL_*, as the CLI does
        _instrument(app)
    return app


def _admin(principal: Principal, what: str) -> None:
    if not principal.admin:
        raise ServiceError(403, f"{what} needs an admin key")


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


def _unattended(pipe: Pipeline, name: str) -> None:
    """A pipeline that pauses for approval runs only through /v1/ask and /v1/threads/{id}/resume."""
    if pipe.pauses:
        raise ServiceError(400, f"pipeline {name!r} pauses for a human's approval before each action "
                                "(graph.router.approve): ask with POST /v1/ask, answer with "
                                "POST /v1/threads/{thread_id}/resume")


def _unique(name: str, taken: list[str]) -> str:
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    candidate, i = name, 1
    while candidate in taken:
        i += 1
        candidate = f"{stem}-{i}{dot}{ext}"
    return candidate
