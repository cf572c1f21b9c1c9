"""OpenTelemetry spans of Switchyard's runs, through the OpenTelemetry **API** only.

The library never sets up a tracer provider: its spans go to whatever provider the process installed. Embedded in a
host service, they join the host's traces (its provider, exporters and sampling); with none installed, the API's
default makes every span a no-op. Switchyard's own processes, the CLI and the server, install an SDK provider from
the `OTEL_*` environment variables (`switchyard.otel_sdk`).

A run's spans never mix with another run's: the run span's context travels in the run's `RunContext`
(`trace_context`), and node spans take it as their parent explicitly; spans below a node (LLM calls, retrieval,
agent decisions) are children of the current span, which the node makes current in the thread that runs it.

Attribute names follow OpenInference (`openinference.span.kind`, `llm.*`, `retrieval.documents.*`) and the GenAI
semantic conventions (`gen_ai.*`), so Phoenix, Langfuse and Jaeger show LLM and retriever spans as such. Text
(questions, queries, answers) is recorded only with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

SPAN_KIND = "openinference.span.kind"
TRACER_NAME = "switchyard"


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def tracer() -> trace.Tracer:
    """The tracer of the provider the process has installed now (the API's no-op one when there is none)."""
    return trace.get_tracer(TRACER_NAME)


def capture_content() -> bool:
    return _truthy("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")


def trace_id(span: Span) -> str | None:
    """The span's trace id as 32 hex digits, or None when the span is not recorded (tracing off)."""
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if span.is_recording() and ctx.is_valid else None


def current_trace_id() -> str | None:
    return trace_id(trace.get_current_span())


def failed(span: Span, exc: BaseException) -> None:
    """Mark the span as failed by `exc` (a cancellation is not recorded as an exception event)."""
    if isinstance(exc, Exception):
        span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))


@contextmanager
def run_span(name: str, attributes: dict, run) -> Iterator[Span]:
    """The span of one run (`run`: its `RunContext`), a child of the current span (an HTTP request's). It is not
    made current, since a streamed run's body is a generator resumed in other contexts: its nodes name it as their
    parent through `run.trace_context` instead."""
    span = tracer().start_span(name, attributes=attributes)
    run.trace_context = trace.set_span_in_context(span)
    run.trace_id = trace_id(span)
    try:
        yield span
    except BaseException as exc:
        failed(span, exc)
        raise
    finally:
        span.end()


@contextmanager
def span(
    name: str, attributes: dict | None = None, parent: Context | None = None, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span]:
    """A span made current for the block (in this thread or task); `parent` defaults to the current span."""
    with tracer().start_as_current_span(
        name, context=parent, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            failed(current, exc)
            raise
