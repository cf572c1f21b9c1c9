"""The importable pipeline: `Pipeline(config).ask(question)` gives an `AskResult` whose `to_json()` is `switchyard ask
--json`, and `Pipeline.stream(question)` gives the run as typed events (graphs/results.py). One `Pipeline` serves
many callers at once (threads or asyncio tasks): the models it shares are guarded, and each run's data (its usage,
seed, cancellation and token stream) travels with the run as LangGraph runtime context, never in the shared objects.

LangGraph's own tooling (`langgraph.json`) builds its graphs with graphs/langgraph_server.py instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from switchyard import tracing
from switchyard.configs.loader import config_hash, config_to_dict, load_config
from switchyard.configs.schema import SwitchyardConfig
from switchyard.conversation import Message, as_dicts, as_history
from switchyard.errors import (
    ConfigError,
    PauseExpired,
    QuestionError,
    SwitchyardError,
    UnknownThread,
    first_line,
    program,
)
from switchyard.extras import check_config
from switchyard.graphs.build import build_graph
from switchyard.graphs.conversations import ConversationStore
from switchyard.graphs.results import (
    STREAM_EVENT,
    Answer,
    AskResult,
    ConfigInfo,
    Decision,
    ErrorEvent,
    Failures,
    NodeEnd,
    PassageRef,
    Passages,
    Paused,
    PendingAction,
    RunStart,
    StreamEvent,
    Usage,
)
from switchyard.nodes.approve import Approval, checked_arguments
from switchyard.nodes.resources import Resources, SharedModels
from switchyard.nodes.search import search_passages
from switchyard.retrievers.search import SearchResult
from switchyard.run_context import ALL, RunContext, Scope

STREAM_MODES = ["custom", "updates", "values"]
_PASSAGE_KEYS = ("candidates", "reranked", "graded")


class Pipeline:
    """Pass one `SharedModels` to every pipeline of a process to share loaded models between them. With
    graph.router.approve, `checkpointer` keeps the paused runs (default: in memory; the service's is on disk)."""

    def __init__(
        self,
        config: SwitchyardConfig | None = None,
        models: SharedModels | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
        conversations: ConversationStore | None = None,
    ):
        self.config = config or load_config()
        check_config(self.config)  # a missing extra is one clear error now, not an ImportError mid-run
        self.resources = Resources(self.config, models)
        self.graph = build_graph(self.config, self.resources, checkpointer)
        self.config_hash = config_hash(self.config)
        # conversation threads (ask(..., thread_id=...)): in memory unless the caller keeps them elsewhere
        self.conversations = conversations or ConversationStore(expire_s=self.config.conversation.expire_s)

    def close(self) -> None:
        """Stop the threads this pipeline started for its queries, once no run is in flight; it stays usable (a
        later query starts them again). `with Pipeline(...) as pipe:` closes it at the end of the block."""
        self.resources.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pauses(self) -> bool:
        """Does a run pause for a human before each action (graph.router.approve)? Then use `start` / `resume`."""
        return self.config.graph.mode == "agent" and self.config.graph.router.approve

    def warm_up(self) -> None:
        """Load every model and open the index now (a service calls this at start; the CLI stays lazy)."""
        self.resources.warm_up()

    def check_ready(self) -> None:
        """Clear errors before any model loads: a missing or empty collection."""
        store = self.resources.stack.store
        if store.table().count_rows() == 0:
            raise QuestionError(f"collection {store.collection!r} is empty; run `{program()} ingest PATH` first")

    # -- one answer --------------------------------------------------------------------------------------------
    def ask(
        self,
        question: str,
        where: str | None = None,
        *,
        history: Iterable[Any] | None = None,
        thread_id: str | None = None,
        owner: str | None = None,
        standalone: str | None = None,
        seed: int | None = None,
        groups: Scope | None = ALL,
    ) -> AskResult:
        """Run the graph and return its `AskResult` (`.to_json()` is `ask --json`). `seed` (default: llm.seed) makes
        sampling at temperature > 0 depend on the question and run alone, never on what else is in flight.
        `groups`: the caller's access scope, its groups (it reads only documents unlabelled or labelled with one of
        them) or, by default for this in-process caller, `ALL` (every document); None is refused (`AccessError`);
        so do `aask`, `search`, `stream` and `astream` (or the `groups` of the `RunContext` given to the streams).

        A conversation: `history`, the earlier turns (`Message`s, OpenAI-style dicts or LangChain messages; oldest
        first), or `thread_id`, whose turns this pipeline keeps (`self.conversations`: the question and answer are
        appended after the run; a new id starts a thread). `owner` names who may use the thread (a service's key);
        another owner's thread is an `UnknownConversation`, one unused past conversation.expire_s
        `ConversationExpired`. `HistoryError` for history that does not parse; the same for `aask`, `stream`,
        `astream` and `search` (history only). `standalone`: the question made standalone by the caller (a human
        rewrite), used by conversation.method `given`."""
        turn, context = self._unattended_turn(question, history, thread_id, owner, standalone, seed, groups)
        with self._run_span(turn.question, where, context) as span:
            state = self.graph.invoke(turn.input(where), config=self._run_config(), context=context)
            return _finished(span, self._kept(turn, self._result(turn.question, state, context)))

    async def aask(
        self,
        question: str,
        where: str | None = None,
        *,
        history: Iterable[Any] | None = None,
        thread_id: str | None = None,
        owner: str | None = None,
        standalone: str | None = None,
        seed: int | None = None,
        groups: Scope | None = ALL,
    ) -> AskResult:
        turn, context = self._unattended_turn(question, history, thread_id, owner, standalone, seed, groups)
        with self._run_span(turn.question, where, context) as span:
            try:
                state = await self.graph.ainvoke(turn.input(where), config=self._run_config(), context=context)
            except asyncio.CancelledError:  # e.g. a timeout around this call: stop the LLM work in the threads too
                context.cancelled.set()
                raise
            return _finished(span, self._kept(turn, self._result(turn.question, state, context)))

    def _unattended_turn(
        self,
        question: str,
        history: Iterable[Any] | None,
        thread_id: str | None,
        owner: str | None,
        standalone: str | None,
        seed: int | None,
        groups: Scope | None,
    ) -> tuple[Turn, RunContext]:
        """The checked turn of an `ask` / `aask` and its run context (the errors of `ask`'s docstring)."""
        question = self.checked_question(question)
        self._unattended()
        return self.turn(question, history, thread_id, owner, standalone), RunContext(seed=seed, groups=groups)

    # -- a human in the loop (graph.router.approve) -----------------------------------------------------------
    def start(
        self,
        question: str,
        where: str | None = None,
        *,
        thread_id: str | None = None,
        context: RunContext | None = None,
    ) -> AskResult | Paused:
        """Run until the first pause: `Paused` (the pending action and the run's `thread_id`), or the `AskResult`
        of a run that needed no action (a question the no-documents rules answer). `context` as for `stream`; the
        run id is the thread id."""
        question = self.checked_question(question)
        self._needs_pauses()
        context = context or (RunContext(run_id=thread_id) if thread_id else RunContext())
        return self._until_pause(question, where, self._input(question, where), thread_id or context.run_id, context)

    def resume(self, thread_id: str, approval: Approval, *, context: RunContext | None = None) -> AskResult | Paused:
        """Answer a paused run and go on to its next pause or its result. `UnknownThread` for a thread that does
        not wait, `PauseExpired` past graph.router.approve_timeout_s (the thread is then forgotten),
        `ApprovalError` for an edit the action cannot take (the run stays paused). Give the same `groups` (in
        `context`) as the run started with: the context is not kept across pauses."""
        self._needs_pauses()
        paused = self.pending(thread_id)
        if paused is None:
            raise UnknownThread(f"no paused run {thread_id!r}")
        if paused.expires_at.timestamp() <= time.time():
            self.forget(thread_id)
            raise PauseExpired(
                f"the pause of run {thread_id!r} expired at {paused.expires_at.isoformat()} "
                f"(graph.router.approve_timeout_s); it cannot be resumed"
            )
        if approval.decision == "edit":
            checked_arguments(paused.pending.action, approval.arguments)
        context = context or RunContext(run_id=thread_id)
        return self._until_pause(paused.question, None, Command(resume=approval.model_dump()), thread_id, context)

    def pending(self, thread_id: str) -> Paused | None:
        """The pause a thread waits at, or None (unknown, finished or forgotten)."""
        snapshot = self.graph.get_state(self._thread(thread_id))
        if not snapshot.interrupts:
            return None
        value = dict(snapshot.interrupts[0].value)
        expires = value.pop("paused_at") + self.config.graph.router.approve_timeout_s
        return Paused(
            thread_id=thread_id,
            question=snapshot.values["question"],
            pending=PendingAction(**value),
            expires_at=datetime.fromtimestamp(expires, UTC),
        )

    def forget(self, thread_id: str) -> None:
        """Delete a thread's checkpoints (a finished or expired run)."""
        self.graph.checkpointer.delete_thread(thread_id)

    def _until_pause(
        self, question: str, where: str | None, graph_input, thread_id: str, context: RunContext
    ) -> AskResult | Paused:
        with self._run_span(question, where, context) as span:
            state = self.graph.invoke(
                graph_input, config={**self._run_config(), **self._thread(thread_id)}, context=context
            )
            if "__interrupt__" in state:
                paused = self.pending(thread_id)
                assert paused is not None  # the run has just stopped at an interrupt
                return paused
            self.forget(thread_id)
            return _finished(span, self._result(question, state, context))

    @staticmethod
    def _thread(thread_id: str) -> dict:
        return {"configurable": {"thread_id": thread_id}}

    def _needs_pauses(self) -> None:
        if not self.pauses:
            raise ConfigError("start/resume are for pipelines that pause for approval (graph.router.approve); use ask")

    def _unattended(self) -> None:
        if self.pauses:
            raise ConfigError(
                "this pipeline pauses for a human's approval before each action "
                f"(graph.router.approve): run it with Pipeline.start / resume, `{program()} ask` or the "
                "service's POST /v1/ask"
            )

    # -- what a run retrieves ----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        where: str | None = None,
        top_k: int | None = None,
        groups: Scope | None = ALL,
        *,
        history: Iterable[Any] | None = None,
    ) -> SearchResult:
        """The passages `ask(query, where)` retrieves in its first round (nodes/search.py `search_passages`): the
        configured rewrite's queries (PRF with the filter; an LLM rewrite makes one LLM call), the one retrieval path,
        then the reranker; `top_k` passages (default `rerank.top_k`). `QuestionError`/`StoreError` as for `ask`."""
        question = self.checked_question(query)
        return search_passages(
            question,
            stack=self.resources.stack,
            get_llm=lambda: self.resources.llm,
            where=where,
            top_k=top_k,
            groups=groups,
            history=as_history(history),
        )

    # -- the run as events -------------------------------------------------------------------------------------
    def stream(
        self,
        question: str,
        where: str | None = None,
        *,
        history: Iterable[Any] | None = None,
        thread_id: str | None = None,
        owner: str | None = None,
        seed: int | None = None,
        context: RunContext | None = None,
        groups: Scope | None = ALL,
    ) -> Iterator[StreamEvent]:
        """The run as typed events (graphs/results.py; `.event` names the kind, `.to_json()` is the streamed
        JSON), in order:

        `run_start {run_id, config_hash}`; per node `node_start {node}`, then `node_end {node, ms, llm_calls,
        prompt_tokens, completion_tokens, summary}`, with `passages {node, passages: [{doc_id, title, source,
        page, score}]}` after retrieve/rerank/grade and `decision {step, action, args, guard, thought}` after each
        agent router step; `token {text}` while the answer is generated (answer tokens only); last `answer
        {result}`, where `result` is the `AskResult` `ask()` returns, or `error {message}`.

        The streamed tokens are provisional: citations are verified after generation, and unsupported sentences
        may be removed or the answer replaced. The final `answer` event is authoritative.

        A bad question raises `QuestionError` at once. Closing the iterator early cancels the run: no further
        LLM call is made and a generation in progress stops. So does setting `context.cancelled` (pass your own
        `RunContext`, e.g. to enforce a deadline; its seed then applies).
        """
        question = self.checked_question(question)
        self._unattended()
        turn = self.turn(question, history, thread_id, owner)
        return self._events(turn, where, _streamed(context, seed, groups))

    def astream(
        self,
        question: str,
        where: str | None = None,
        *,
        history: Iterable[Any] | None = None,
        thread_id: str | None = None,
        owner: str | None = None,
        seed: int | None = None,
        context: RunContext | None = None,
        groups: Scope | None = ALL,
    ) -> AsyncGenerator[StreamEvent, None]:
        """`stream()` for asyncio: the same events; closing the iterator (or cancelling its task) cancels the run."""
        question = self.checked_question(question)
        self._unattended()
        turn = self.turn(question, history, thread_id, owner)
        return self._aevents(turn, where, _streamed(context, seed, groups))

    def _events(self, turn: Turn, where: str | None, context: RunContext) -> Iterator[StreamEvent]:
        question = turn.question
        with self._run_span(question, where, context) as span:
            yield RunStart(run_id=context.run_id, config_hash=self.config_hash)
            chunks = self.graph.stream(
                turn.input(where), config=self._run_config(), context=context, stream_mode=STREAM_MODES
            )
            state, finished = None, False
            try:
                for mode, chunk in chunks:
                    if mode == "values":
                        state = chunk
                    else:
                        yield from stream_events(mode, chunk)
                finished = True
            except Exception as exc:  # the run failed: say so as the last event
                tracing.failed(span, exc)
                yield ErrorEvent(message=error_message(exc))
                return
            finally:
                if not finished:
                    context.cancelled.set()
                chunks.close()
            assert state is not None  # a finished stream has yielded its "values" at least once
            yield Answer(result=_finished(span, self._kept(turn, self._result(question, state, context))))

    async def _aevents(self, turn: Turn, where: str | None, context: RunContext) -> AsyncGenerator[StreamEvent, None]:
        question = turn.question
        with self._run_span(question, where, context) as span:
            yield RunStart(run_id=context.run_id, config_hash=self.config_hash)
            chunks = self.graph.astream(
                turn.input(where), config=self._run_config(), context=context, stream_mode=STREAM_MODES
            )
            state, finished = None, False
            try:
                async for mode, chunk in chunks:
                    if mode == "values":
                        state = chunk
                    else:
                        for event in stream_events(mode, chunk):
                            yield event
                finished = True
            except Exception as exc:
                tracing.failed(span, exc)
                yield ErrorEvent(message=error_message(exc))
                return
            finally:
                if not finished:
                    context.cancelled.set()
                await chunks.aclose()
            assert state is not None  # a finished stream has yielded its "values" at least once
            yield Answer(result=_finished(span, self._kept(turn, self._result(question, state, context))))

    # -- shared by every way of running ------------------------------------------------------------------------
    def checked_question(self, question: str) -> str:
        """The stripped question; `QuestionError`/`StoreError` for an empty question or a missing/empty collection."""
        if not question or not question.strip():
            raise QuestionError("the question is empty")
        if self.config.graph.mode != "closed_book":
            self.check_ready()
        return question.strip()

    @staticmethod
    def _input(question: str, where: str | None) -> dict:
        return {"question": question, "where": where, "attempts": 0}

    def turn(
        self,
        question: str,
        history: Iterable[Any] | None,
        thread_id: str | None,
        owner: str | None = None,
        standalone: str | None = None,
    ) -> Turn:
        """The question with its conversation: `history` as given, or the turns thread `thread_id` holds;
        `standalone`, a standalone form of the question the caller has (conversation.method given)."""
        if history is not None and thread_id is not None:
            raise QuestionError("give the earlier turns as history or keep them in a thread_id, not both")
        given = standalone.strip() if standalone and standalone.strip() else None
        if thread_id is not None:
            return Turn(question, self.conversations.turns(thread_id, owner), thread_id, owner, given)
        return Turn(question, as_history(history), standalone=given)

    def _kept(self, turn: Turn, result: AskResult) -> AskResult:
        """The result of a turn, appended to its thread."""
        if turn.thread_id is not None:
            self.conversations.append(turn.thread_id, turn.question, result.answer, turn.owner)
            result.thread_id = turn.thread_id
        return result

    @contextmanager
    def _run_span(self, question: str, where: str | None, context: RunContext) -> Iterator:
        """The run's trace span (a no-op while tracing is off); its context travels in `context`."""
        attributes = {
            tracing.SPAN_KIND: "AGENT" if self.config.graph.mode == "agent" else "CHAIN",
            "switchyard.run_id": context.run_id,
            "switchyard.config_hash": self.config_hash,
            "switchyard.collection": self.config.store.collection,
            "switchyard.graph": self.graph.name,
        }
        if where:
            attributes["switchyard.filter"] = where
        if tracing.capture_content():
            attributes["input.value"] = question
        with tracing.run_span(self.graph.name, attributes, context) as span:
            yield span

    def _run_config(self) -> dict:
        return {"recursion_limit": self.config.graph.recursion_limit}

    def _result(self, question: str, state: dict, context: RunContext) -> AskResult:
        steps = state.get("agent_steps", [])
        guards: dict[str, int] = {}
        for s in steps:
            if s.get("guard"):
                guards[s["guard"]] = guards.get(s["guard"], 0) + 1
        usage = dict(state.get("usage", {}))
        parse_fallbacks = int(usage.pop("parse_fallbacks", 0))
        return AskResult(
            question=question,
            standalone=state.get("standalone") if state.get("history") else None,
            run_id=context.run_id,
            trace_id=context.trace_id,
            answer=state.get("answer", ""),
            short_answer=state.get("short_answer", ""),
            evidence=state.get("evidence", ""),
            grounding=state.get("grounding", {}),
            abstained=bool(state.get("abstained", False)),
            citations=state.get("citations", []),
            verdict=state.get("verdict"),
            queries=state.get("query_history", []),
            retrieved_doc_ids=list(dict.fromkeys(state.get("retrieved", []))),
            citation_check=state.get("citation_check", {}),
            trace=state.get("trace", []),
            steps=steps,
            failures=Failures(parse_fallbacks=parse_fallbacks, guards=guards),
            usage=Usage(**usage),
            config=ConfigInfo(hash=self.config_hash, resolved=config_to_dict(self.config)),
        )


@dataclass(frozen=True)
class Turn:
    """One question of a conversation: the question, its earlier turns and, in thread form, its thread."""

    question: str
    history: list[Message] = field(default_factory=list)
    thread_id: str | None = None
    owner: str | None = None
    standalone: str | None = None  # the caller's standalone form of the question (conversation.method given)

    def input(self, where: str | None) -> dict:
        """The graph's input: a question alone exactly as before conversations, else with its turns."""
        values: dict = {"question": self.question, "where": where, "attempts": 0}
        if self.history:
            values["history"] = as_dicts(self.history)
            if self.standalone:
                values["standalone_given"] = self.standalone
        return values


def _finished(span, result: AskResult) -> AskResult:
    """The run span's closing attributes; returns `result`."""
    if span.is_recording():
        span.set_attributes(
            {
                "switchyard.abstained": result.abstained,
                "switchyard.verdict": result.verdict or "",
                "switchyard.llm_calls": result.usage.llm_calls,
                "llm.token_count.prompt": result.usage.prompt_tokens,
                "llm.token_count.completion": result.usage.completion_tokens,
            }
        )
        if tracing.capture_content():
            span.set_attribute("output.value", result.answer)
    return result


def _streamed(context: RunContext | None, seed: int | None, groups: Scope | None) -> RunContext:
    if context is not None and groups is not ALL:
        raise ValueError("give the groups in the RunContext passed as context")
    context = context or RunContext(seed=seed, groups=groups)
    context.stream_tokens = True
    return context


def stream_events(mode: str, chunk) -> list[StreamEvent]:
    """Translate one LangGraph stream item (`custom` or `updates` mode) into Switchyard events."""
    if mode == "custom":  # what the nodes wrote: node_start, token
        return [STREAM_EVENT.validate_python(chunk)]
    events: list[StreamEvent] = []
    for node, update in (chunk or {}).items():
        if not update:
            continue
        entry = (update.get("trace") or [{}])[0]
        events.append(
            NodeEnd(
                node=node,
                ms=entry.get("ms", 0.0),
                llm_calls=entry.get("llm_calls", 0),
                prompt_tokens=entry.get("prompt_tokens", 0),
                completion_tokens=entry.get("completion_tokens", 0),
                summary=entry.get("output", {}),
            )
        )
        for key in _PASSAGE_KEYS:
            if key in update:
                events.append(
                    Passages(
                        node=node,
                        passages=[
                            PassageRef(doc_id=p.doc_id, title=p.title, source=p.source, page=p.page, score=p.score)
                            for p in update[key]
                        ],
                    )
                )
        if "decision" in update:
            decision = update["decision"]
            events.append(Decision(**{k: decision.get(k) for k in ("step", "action", "args", "guard", "thought")}))
    return events


def error_message(exc: BaseException) -> str:
    """One line for a failed run: the message of our own errors, the type as well for anything unexpected."""
    return first_line(exc) if isinstance(exc, SwitchyardError) else f"{type(exc).__name__}: {first_line(exc)}"
