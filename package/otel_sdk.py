"""The OpenTelemetry SDK set-up of Switchyard's own processes: the CLI and the server (the `otel` extra).

The library only uses the OpenTelemetry API (switchyard.tracing); a host that embeds it installs its own
provider. `switchyard` commands and `switchyard serve` instead read the standard variables: with
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, `install()` makes an SDK tracer
provider that sends spans over OTLP/HTTP (protobuf) to it, named by `OTEL_SERVICE_NAME` (default `switchyard`), and
installs it as the process's global provider; the exporter reads its other standard variables itself (headers,
timeout, compression). `OTEL_SDK_DISABLED=true` turns it off even with an endpoint. Without an endpoint nothing is
imported or installed.
"""

from __future__ import annotations

import os
import threading

from switchyard.errors import MissingExtra

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_SERVICE_NAME = "switchyard"

_lock = threading.Lock()
_provider = None  # the SDK TracerProvider install() built; None when tracing is off


def configured() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint, and the SDK not disabled)."""
    disabled = os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return not disabled and any(os.environ.get(v, "").strip() for v in ENDPOINT_VARIABLES)


def install():
    """Build the SDK provider the environment configures and make it the global one (once); None when tracing is
    off. Called by the CLI and the server at start, never by the library."""
    global _provider
    with _lock:
        if _provider is None and configured():
            from opentelemetry import trace

            _provider = _build()
            trace.set_tracer_provider(_provider)
    return _provider


def provider():
    """The provider install() built, or None."""
    return _provider


def _build():
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ModuleNotFoundError as exc:
        raise MissingExtra.for_module(exc, "OTEL_EXPORTER_OTLP_ENDPOINT (traces over OTLP)", "otel") from None
    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
    built = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    built.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # the exporter reads the OTEL_* variables
    return built


def flush(timeout_ms: int = 5000) -> None:
    """Send the spans still buffered (the provider also flushes at process exit)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def shutdown() -> None:
    """Flush and forget the provider built here (tests: the next install() reads the environment again; the
    caller resets OpenTelemetry's own global, which the API lets a process set only once)."""
    global _provider
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _provider = None
