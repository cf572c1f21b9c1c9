"""Prometheus metrics of one server: requests by route and status, latency, LLM use, runs in flight, rejections.

Each app has its own registry (several apps can live in one process, as in tests). Requests are labelled by route
template (`/v1/jobs/{job_id}`), never by the raw path, so the label set stays bounded.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServiceMetrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "switchyard_requests_total", "HTTP requests", ["route", "method", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "switchyard_request_seconds",
            "HTTP request latency (to the last byte)",
            ["route"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        self.llm_calls = Counter(
            "switchyard_llm_calls_total", "LLM calls made by runs", ["pipeline"], registry=self.registry
        )
        self.llm_tokens = Counter(
            "switchyard_llm_tokens_total", "LLM tokens used by runs", ["pipeline", "kind"], registry=self.registry
        )
        self.runs_in_flight = Gauge("switchyard_runs_in_flight", "pipeline runs in progress", registry=self.registry)
        self.rejected = Counter(
            "switchyard_rejected_total", "runs refused (back-pressure)", ["reason"], registry=self.registry
        )

    def observe_run(self, pipeline: str, usage: dict) -> None:
        self.llm_calls.labels(pipeline).inc(usage.get("llm_calls", 0))
        self.llm_tokens.labels(pipeline, "prompt").inc(usage.get("prompt_tokens", 0))
        self.llm_tokens.labels(pipeline, "completion").inc(usage.get("completion_tokens", 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts every HTTP request when its response has been sent in full (streams included)."""

    def __init__(self, app, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), [500]

        async def record(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or ("unmatched" if status[0] == 404 else scope["path"])
            self.metrics.requests.labels(label, scope["method"], str(status[0])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)
