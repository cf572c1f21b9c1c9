"""What one run carries into the models it shares with other runs: usage meters, its seed, its token sink and its
cancellation flag.

`RunContext` is the LangGraph runtime context of a run (`graph.invoke(..., context=RunContext(...))`). The graph's
node wrapper opens a `metered(...)` scope around each node call; the LLM interface (nodes/llm.py) reads the scope
of the thread it runs in. A scope lives in a `contextvars` value set and reset inside one node call, so two runs in
flight at once, in threads or asyncio tasks, never see each other's meters: no shared counter is differenced.
"""
from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Iterator

TokenSink = Callable[[str], None]


class RunCancelled(RuntimeError):
    """The run was cancelled (its client went away); no further LLM call is made for it."""


@dataclass
class RunContext:
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    seed: int | None = None                 # sampling seed of this run (None: the backend's configured seed)
    stream_tokens: bool = False             # send the answer's tokens to the stream as they are generated
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass
class Usage:
    """LLM use of one scope (a node call, a router decision, a judged answer)."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0          # wall time inside the backend, to separate generation from pipeline overhead
    parse_fallbacks: int = 0     # structured replies that stayed invalid after the repair round

    def as_dict(self) -> dict:
        return {"llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "llm_ms": round(self.llm_ms, 2),
                "parse_fallbacks": self.parse_fallbacks}


@dataclass(frozen=True)
class _Scope:
    meters: tuple[Usage, ...] = ()
    seed: int | None = None
    cancelled: threading.Event | None = None
    token_sink: TokenSink | None = None


_SCOPE: ContextVar[_Scope] = ContextVar("switchyard_llm_scope", default=_Scope())


@contextmanager
def metered(context: RunContext | None = None, token_sink: TokenSink | None = None) -> Iterator[Usage]:
    """Count the LLM use inside the block into a fresh `Usage` (and into every enclosing scope's). A `context`
    sets the run's seed and cancellation flag for the block; otherwise the enclosing scope's apply."""
    outer = _SCOPE.get()
    meter = Usage()
    scope = _Scope(meters=outer.meters + (meter,),
                   seed=context.seed if context is not None else outer.seed,
                   cancelled=context.cancelled if context is not None else outer.cancelled,
                   token_sink=token_sink if token_sink is not None else outer.token_sink)
    token = _SCOPE.set(scope)
    try:
        yield meter
    finally:
        _SCOPE.reset(token)


def record_call(prompt_tokens: int, completion_tokens: int, ms: float) -> None:
    for meter in _SCOPE.get().meters:
        meter.llm_calls += 1
        meter.prompt_tokens += prompt_tokens
        meter.completion_tokens += completion_tokens
        meter.llm_ms += ms


def record_time(ms: float) -> None:
    """Time spent on a call that failed (it is retried): counted as LLM time, not as a call."""
    for meter in _SCOPE.get().meters:
        meter.llm_ms += ms


def record_parse_fallback() -> None:
    for meter in _SCOPE.get().meters:
        meter.parse_fallbacks += 1


def run_seed() -> int | None:
    return _SCOPE.get().seed


def cancellation() -> threading.Event | None:
    return _SCOPE.get().cancelled


def answer_token_sink() -> TokenSink | None:
    """Where the answer node sends its tokens when the run is streamed (None otherwise). Only the answer node asks
    for it, so rewrite, grading and router calls never reach the token stream."""
    return _SCOPE.get().token_sink
