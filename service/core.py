"""The `Service`: what every route shares (pipelines, collection access, upload jobs, keys, paused runs, metrics, the
run slots) and how a run is made within the service's limits (runs in flight, the request timeout). Routes reach it
through the providers of service/dependencies.py; the MCP tool `ask` through `bounded_ask`."""

from __future__ import annotations

import asyncio
import threading

import anyio

from switchyard.conversation import as_history
from switchyard.errors import PauseExpired, QuestionError, ServiceError, SwitchyardError, UnknownThread
from switchyard.graphs.conversations import CONVERSATIONS_NAME
from switchyard.graphs.pipeline import Pipeline
from switchyard.graphs.results import Answer, AskResult, ErrorEvent, Paused
from switchyard.nodes.approve import Approval, checked_arguments
from switchyard.run_context import RunContext
from switchyard.service.access import CollectionAccess
from switchyard.service.error_responses import run_error
from switchyard.service.job_store import job_store_path
from switchyard.service.jobs import IngestJobs
from switchyard.service.keys import LOCAL, Principal
from switchyard.service.metrics import ServiceMetrics
from switchyard.service.registry import PipelineRegistry
from switchyard.service.schemas import ThreadDone
from switchyard.service.settings import ServiceSettings, beside_index
from switchyard.service.state import open_state
from switchyard.service.threads import PausedRuns, Thread, threads_path

RETRY_AFTER_S = 1
HISTORY_QUESTIONS = 50  # a request's earlier turns may hold this many questions' characters (max_question_chars)


class Slot:
    """One run's place among those in flight; `release()` may be called more than once (stream end, response
    end), the place is given back once."""

    def __init__(self, service: Service, principal: Principal):
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


class Service:
    """Everything the routes share: pipelines, jobs, metrics and the run slots (all safe across requests)."""

    def __init__(self, settings: ServiceSettings):
        self.settings = settings
        self.registry = PipelineRegistry(settings.configs, settings.overrides)
        self.access = CollectionAccess(self.registry)
        store_uri = self.registry.configs[self.registry.default].store.uri  # where registry.stack ingests
        # keys, per-key limits, the audit log and upload jobs: beside the index, or in PostgreSQL shared by servers
        self.state = open_state(
            settings.state_url,
            store_uri,
            settings.upload_dir,
            settings.audit_log,
            settings.audit_questions,
            settings.job_lease_s,
        )
        job_store = self.state.job_store(job_store_path(store_uri, settings.upload_dir))
        self.jobs = IngestJobs(settings.upload_dir, self.registry.stack, job_store)
        self.metrics = ServiceMetrics()
        self.slots = RunSlots(settings.max_in_flight)
        self.keys = self.state.keys
        self.key_runs = self.state.key_runs
        # paused runs (graph.router.approve) beside the index; no file unless a served pipeline pauses
        self.threads = (
            self.state.paused_runs(
                threads_path(store_uri, settings.upload_dir), stale_after_s=2 * settings.request_timeout_s
            )
            if self.registry.pauses()
            else None
        )
        if self.threads is not None:
            self.registry.checkpointer = self.threads.checkpointer
        # conversation threads (`thread_id` on /v1/ask), beside the index: they outlive a restart
        self.conversations = self.state.conversations(
            beside_index(store_uri, settings.upload_dir, CONVERSATIONS_NAME),
            self.registry.configs[self.registry.default].conversation.expire_s,
        )
        self.registry.conversations = self.conversations

    @property
    def paused_runs(self) -> PausedRuns:
        """The record of paused runs, where one is known to exist: a run paused, or a thread was found in it."""
        assert self.threads is not None  # set whenever a served pipeline pauses (graph.router.approve)
        return self.threads

    def collections(self, principal: Principal = LOCAL) -> list[str]:
        """The collections of the index that `principal` may read."""
        return self.access.visible(principal)

    def check_question(self, question: str, what: str = "question") -> None:
        if not question or not question.strip():
            raise QuestionError(f"the {what} is empty")
        if len(question) > self.settings.max_question_chars:
            raise ServiceError(413, f"the {what} is longer than {self.settings.max_question_chars} characters")

    def check_history(self, history: list) -> None:
        """413 for a conversation longer than HISTORY_QUESTIONS questions' worth of characters in all."""
        limit = HISTORY_QUESTIONS * self.settings.max_question_chars
        if sum(len(m.content) for m in history) > limit:
            raise ServiceError(413, f"the earlier turns hold more than {limit} characters in all")

    def acquire(self, principal: Principal) -> Slot:
        """A place among the runs in flight, of the server and of the principal's key (429 beyond either)."""
        limit = principal.max_in_flight
        if limit and not self.key_runs.try_acquire(principal.name, limit):
            self.metrics.rejected.labels("key_in_flight").inc()
            raise ServiceError(
                429,
                f"key {principal.name!r} has {limit} runs in flight; retry shortly",
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        if not self.slots.try_acquire():
            if limit:
                self.key_runs.release(principal.name)
            self.metrics.rejected.labels("in_flight").inc()
            raise ServiceError(
                429, f"{self.slots.limit} runs are in flight; retry shortly", {"Retry-After": str(RETRY_AFTER_S)}
            )
        self.metrics.runs_in_flight.inc()
        return Slot(self, principal)

    def _release(self, principal: Principal) -> None:
        self.slots.release()
        if principal.max_in_flight:
            self.key_runs.release(principal.name)
        self.metrics.runs_in_flight.dec()

    def timed_out(self) -> ServiceError:
        return ServiceError(504, f"the run timed out after {self.settings.request_timeout_s:g}s")

    async def ask(
        self,
        pipe: Pipeline,
        name: str,
        question: str,
        where: str | None,
        principal: Principal,
        *,
        history: list | None = None,
        thread_id: str | None = None,
    ) -> AskResult:
        """One run with the request timeout, reading what `principal` may read; a timed-out run is cancelled (its
        LLM calls stop). A conversation's turn: `history`, or `thread_id` (the principal's own thread)."""
        try:
            result = await asyncio.wait_for(
                pipe.aask(
                    question,
                    where,
                    history=history or None,
                    thread_id=thread_id,
                    owner=principal.name,
                    groups=principal.scope,
                ),
                self.settings.request_timeout_s,
            )
        except TimeoutError:
            raise self.timed_out() from None
        except Exception as exc:
            raise run_error(exc) from None
        self.metrics.observe_run(name, result.usage.model_dump())
        return result

    async def bounded_ask(
        self,
        pipe: Pipeline,
        name: str,
        question: str,
        where: str | None,
        principal: Principal,
        history: list | None = None,
    ) -> AskResult:
        """`ask` within the service's limits (question length, runs in flight, timeout), as `/v1/ask` runs it; the
        MCP tool `ask` goes through here."""
        self.check_question(question)
        history = as_history(history)  # HistoryError before a slot is taken
        self.check_history(history)
        slot = self.acquire(principal)
        try:
            return await self.ask(pipe, name, question, where, principal, history=history)
        finally:
            slot.release()

    # -- a human in the loop (graph.router.approve) -----------------------------------------------------------
    async def start_thread(
        self, pipe: Pipeline, name: str, question: str, where: str | None, principal: Principal
    ) -> Paused | ThreadDone:
        """Run until the first pause (recorded as the principal's thread) or the answer."""
        context = RunContext(groups=principal.scope)
        try:
            outcome = await self._pausing(lambda: pipe.start(question, where, context=context), context, name)
        except SwitchyardError:
            pipe.forget(context.run_id)
            raise
        if isinstance(outcome, Paused):
            self.paused_runs.add(
                outcome.thread_id, principal.name, name, pipe.resources.stack.collection, outcome.expires_at.timestamp()
            )
            return outcome
        return ThreadDone(**{**dict(outcome), "thread_id": context.run_id})

    def thread(self, principal: Principal, thread_id: str) -> tuple[Thread, Pipeline]:
        """The principal's own thread and its pipeline; 404 for one that does not exist or is another's."""
        thread = self.threads.get(thread_id) if self.threads is not None else None
        if thread is None or thread.owner != principal.name or not principal.can_read(thread.collection):
            raise UnknownThread(f"no paused run {thread_id!r}")
        return thread, self.access.readable(principal, thread.pipeline, thread.collection)

    def check_expiry(self, thread: Thread) -> None:
        """410 for a pause left unanswered past its expiry (its checkpoints are deleted the first time)."""
        if not thread.expired():
            return
        if thread.state != "expired":
            self.paused_runs.finish(thread.id, "expired")
        raise PauseExpired(
            f"the pause of run {thread.id!r} expired (graph.router.approve_timeout_s); it cannot be resumed"
        )

    async def resume_thread(self, principal: Principal, thread_id: str, approval: Approval) -> Paused | ThreadDone:
        """Answer a paused run: 404 (not the principal's), 410 (expired), 409 (being resumed or finished), 422
        (an edit the action cannot take; the run stays paused), else its next pause or its answer."""
        thread, pipe = self.thread(principal, thread_id)
        self.check_expiry(thread)
        if thread.state != "paused":
            raise ServiceError(409, f"run {thread_id!r} is {_STATES[thread.state]}; there is nothing to resume")
        if approval.decision == "edit":
            paused = pipe.pending(thread_id)
            checked_arguments(paused.pending.action if paused else "", approval.arguments)  # ApprovalError: 422
        slot = self.acquire(principal)
        try:
            if not self.paused_runs.claim(thread_id):
                raise ServiceError(
                    409, f"run {thread_id!r} is being resumed by another request, or its pause has just expired"
                )
            context = RunContext(run_id=thread_id, groups=principal.scope)
            try:
                outcome = await self._pausing(
                    lambda: pipe.resume(thread_id, approval, context=context), context, thread.pipeline
                )
            except SwitchyardError as exc:
                self.paused_runs.finish(thread_id, "expired" if exc.http_status == 410 else "failed")
                raise
        finally:
            slot.release()
        if isinstance(outcome, Paused):
            self.paused_runs.paused(thread_id, outcome.expires_at.timestamp())
            return outcome
        self.paused_runs.finish(thread_id, "done")
        return ThreadDone(**{**dict(outcome), "thread_id": thread_id})

    async def _pausing(self, run, context: RunContext, name: str) -> Paused | AskResult:
        """`run()` (a start or resume, synchronous: the checkpointer is) in a thread, with the request timeout."""
        try:
            outcome = await asyncio.wait_for(asyncio.to_thread(run), self.settings.request_timeout_s)
        except TimeoutError:
            context.cancelled.set()
            raise self.timed_out() from None
        except Exception as exc:
            raise run_error(exc) from None
        if isinstance(outcome, AskResult):
            self.metrics.observe_run(name, outcome.usage.model_dump())
        return outcome

    async def events(
        self,
        pipe: Pipeline,
        name: str,
        question: str,
        where: str | None,
        slot: Slot,
        principal: Principal,
        *,
        history: list | None = None,
        thread_id: str | None = None,
    ):
        """The run's events; past the request timeout the run is cancelled (its LLM work stops) and ends with an
        `error` event. The slot is given back when the stream ends or the client goes away."""
        context = RunContext(groups=principal.scope)
        timer = asyncio.get_running_loop().call_later(self.settings.request_timeout_s, context.cancelled.set)
        events = pipe.astream(
            question, where, history=history or None, thread_id=thread_id, owner=principal.name, context=context
        )
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


_STATES = {
    "running": "being resumed by another request",
    "done": "finished",
    "failed": "finished (it failed)",
    "expired": "expired",
}
