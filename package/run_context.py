"""What one run carries into the models it shares with other runs: its id, seed, cancellation flag and usage meters.

It also carries what the run's caller may read (`groups`: its access groups, or `ALL`), which retrieval applies inside
every query.

`RunContext` is the LangGraph runtime context of a run (`graph.invoke(..., context=RunContext(...))`): every node
receives it as `runtime.context` and passes it to the LLM calls it makes (`llm.structured(..., run=context)`), which
count their usage into the meters the run has open (`with context.metered() as usage: ...`). Nothing per-run lives in
the shared objects or in module globals, so two runs in flight at once, in threads or asyncio tasks, never see each
other's meters. A run's steps execute one after another, so its own meters need no lock.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

TokenSink = Callable[[str], None]


class AllScope:
    """The access scope "every document": a caller that owns the index (the local CLI, an admin key, the shared
    token, an in-process `Pipeline`) passes `ALL` on purpose. Every read, count, listing and delete takes a scope and
    refuses `None`, so a forgotten argument is an error instead of a read of everything. One instance, `ALL`, which
    survives pickling (Ray workers, process pools) as itself."""

    _instance: AllScope | None = None

    def __new__(cls) -> AllScope:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self) -> str:
        return "ALL"  # pickled by reference to this module's ALL

    def __repr__(self) -> str:
        return "ALL"


ALL = AllScope()
# What a caller may read: ALL, or its access groups (documents unlabelled or labelled with one of them)
Scope = AllScope | tuple[str, ...]


@dataclass
class Usage:
    """LLM use of one scope (a node call, a router decision, a judged answer)."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0  # wall time inside the backend, to separate generation from pipeline overhead
    parse_fallbacks: int = 0  # structured replies that stayed invalid after the repair round
    repairs: int = 0  # replies that did not validate but did after the repair round (not in as_dict)
    cached_calls: int = 0  # calls answered from the reply cache (llm/cache.py; not in as_dict)

    def as_dict(self) -> dict:
        return {
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "llm_ms": round(self.llm_ms, 2),
            "parse_fallbacks": self.parse_fallbacks,
        }


@dataclass
class RunContext:
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    seed: int | None = None  # sampling seed of this run (None: the backend's configured seed)
    stream_tokens: bool = False  # send the answer's tokens to the stream as they are generated
    cancelled: threading.Event = field(default_factory=threading.Event)
    # the access scope of the run's caller: its groups (retrieval reads only chunks unlabelled or labelled with one
    # of them), or ALL (every chunk: the in-process caller, the local user, an admin); None is refused by retrieval
    groups: Scope | None = ALL
    meters: list[Usage] = field(default_factory=list, repr=False)  # the scopes open now, outermost first
    # the OpenTelemetry context of the run's span (package/tracing.py): its nodes' spans are its children
    trace_context: Any = field(default=None, repr=False)
    trace_id: str | None = None  # the run's trace id while tracing is on

    @contextmanager
    def metered(self) -> Iterator[Usage]:
        """Count the LLM use inside the block into a fresh `Usage` (and into every enclosing scope's)."""
        meter = Usage()
        self.meters.append(meter)
        try:
            yield meter
        finally:
            self.meters.remove(meter)

    def record_call(self, prompt_tokens: int, completion_tokens: int, ms: float, cached: bool = False) -> None:
        for meter in self.meters:
            meter.llm_calls += 1
            meter.cached_calls += cached
            meter.prompt_tokens += prompt_tokens
            meter.completion_tokens += completion_tokens
            meter.llm_ms += ms

    def record_time(self, ms: float) -> None:
        """Time spent on a call that failed (it is retried): counted as LLM time, not as a call."""
        for meter in self.meters:
            meter.llm_ms += ms

    def record_parse_fallback(self) -> None:
        for meter in self.meters:
            meter.parse_fallbacks += 1

    def record_repair(self) -> None:
        for meter in self.meters:
            meter.repairs += 1
