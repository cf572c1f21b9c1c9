"""OpenTelemetry traces: off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.

When it is set, the first span builds an SDK tracer provider that sends spans over OTLP/HTTP (protobuf) to that
endpoint, named by `OTEL_SERVICE_NAME` (default `switchyard`); the exporter reads its other standard variables
itself (headers, timeout, compression). When it is not set, no SDK or exporter is imported: spans come from the
OpenTelemetry API's global tracer, a no-op unless the process embedding Switchyard installed its own provider (whose
traces then include Switchyard's spans). `OTEL_SDK_DISABLED=true` turns it off even with an endpoint.

A run's spans never mix with another run's: the run span's context travels in the run's `RunContext`
(`trace_context`), and node spans take it as their parent explicitly; spans below a node (LLM calls, retrieval,
agent decisions) are children of the current span, which the node makes current in the thread that runs it.

Attribute names follow OpenInference (`openinference.span.kind`, `llm.*`, `retrieval.documents.*`) and the GenAI
semantic conventions (`gen_ai.*`), so Phoenix, Langfuse and Jaeger show LLM and retriever spans as such. Text
(questions, queries, answers) is recorded only with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_SERVICE_NAME = "switchyard"
SPAN_KIND = "openinference.span.kind"
TRACER_NAME = "switchyard"

_lock = threading.Lock()
_decided = False
_provider = None   # the SDK TracerProvider built from the environment; None when tracing is off


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def configured() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint, and the SDK not disabled)."""
    return not _truthy("OTEL_SDK_DISABLED") and any(os.environ.get(v, "").strip() for v in ENDPOINT_VARIABLES)


def provider():
    """The SDK tracer provider the environment configures, built once on first use; None when tracing is off."""
    global _decided, _provider
    if not _decided:
        with _lock:
            if not _decided:
                _provider = _build_provider() if configured() else None
                _decided = True
    return _provider


def _build_provider():
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
    built = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    built.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # the exporter reads the OTEL_* variables
    return built


def reset() -> None:
    """Flush and drop the provider, so that the next span reads the environment again (tests, benchmarks)."""
    global _decided, _provider
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _provider, _decided = None, False


def flush(timeout_ms: int = 5000) -> None:
    """Send the spans still buffered (the provider also flushes at process exit)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def tracer() -> trace.Tracer:
    built = provider()
    return built.get_tracer(TRACER_NAME) if built is not None else trace.get_tracer(TRACER_NAME)


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
def span(name: str, attributes: dict | None = None, parent: Context | None = None,
         kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """A span made current for the block (in this thread or task); `parent` defaults to the current span."""
    with tracer().start_as_current_span(name, context=parent, kind=kind, attributes=attributes,
                                        record_exception=False, set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as exc:
            failed(current, exc)
            raise
