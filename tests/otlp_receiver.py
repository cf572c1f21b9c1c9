"""`OtlpReceiver`: a real OTLP/HTTP trace receiver on 127.0.0.1 (a test stand-in for a collector, Jaeger or
Phoenix, not part of the library). It accepts `POST /v1/traces` with an `application/x-protobuf` body, decodes it
with `opentelemetry-proto` (`ExportTraceServiceRequest`) and keeps every span as a plain `ReceivedSpan`.

    with OtlpReceiver() as receiver:      # receiver.origin: http://127.0.0.1:PORT (OTEL_EXPORTER_OTLP_ENDPOINT)
        ...
        spans = receiver.spans()

Run on its own it prints one line per span it receives, to see a run's spans without an observability stack:

    .venv/bin/python -m tests.otlp_receiver --port 4318
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.canned_server import LoopbackServer, QuietHandler

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str  # "" for a root span
    kind: str
    service: str
    attributes: dict = field(default_factory=dict)
    status: int = 0  # 0 unset, 1 ok, 2 error
    start_ns: int = 0
    end_ns: int = 0


def _value(value: AnyValue):
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one OTLP/HTTP protobuf export request."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        kind=KINDS.get(s.kind, str(s.kind)),
                        service=resource.get("service.name", ""),
                        attributes={kv.key: _value(kv.value) for kv in s.attributes},
                        status=s.status.code,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                    )
                )
    return spans


class OtlpReceiver(LoopbackServer):
    """Collects the spans posted to it from construction until `close()`; safe to read while exports arrive
    (`spans()` returns a copy)."""

    def __init__(self, port: int = 0, on_span=None):
        receiver = self
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self.requests = 0
        self.on_span = on_span

        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = self.read_body()
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(404 if self.path != "/v1/traces" else 415)
                    return
                receiver._add(decode(body))
                self.send_body(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

        super().__init__(Handler, port)

    def _add(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.requests += 1
            self._spans.extend(spans)
        if self.on_span is not None:
            for s in spans:
                self.on_span(s)

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description="print the spans posted to an OTLP/HTTP receiver on 127.0.0.1")
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()

    def show(s: ReceivedSpan) -> None:
        interesting = {k: v for k, v in s.attributes.items() if not k.startswith("retrieval.documents.")}
        print(
            f"{s.trace_id} {s.span_id} <- {s.parent_id or 'root':16} {s.name} "
            f"{(s.end_ns - s.start_ns) / 1e6:.1f} ms {interesting}",
            flush=True,
        )

    receiver = OtlpReceiver(args.port, on_span=show)
    print(f"OTLP/HTTP receiver on {receiver.origin} (Ctrl-C stops it)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        receiver.close()


if __name__ == "__main__":
    main()
