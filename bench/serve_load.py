"""Load on the HTTP service: concurrent clients asking questions, per pipeline and client count.

    .venv/bin/python bench/serve_load.py
    .venv/bin/python bench/serve_load.py [--seconds 30] [--clients 8 32] [--pipelines no-llm fixed]
                                         [--max-in-flight 4] [--port 0] [--keep-index] [--out bench/out/serve_load]
                                         [--tracing off on]

The sample corpus (samples/corpus) is ingested into a temporary index (`cli.py ingest`), then one server is
started on 127.0.0.1 (`cli.py serve --config no-llm --config fixed --max-in-flight N --timeout 120`, stderr to
OUT/server.log) and each pipeline is asked once to warm it. For each (pipeline, client count) cell, that many
asyncio clients (httpx.AsyncClient) loop `POST /v1/ask {"question", "pipeline"}` for --seconds, the questions
drawn round-robin from a list about the corpus; every loop is bounded by the time and by --max-requests. A
client that gets 429/503 waits `Retry-After` seconds (plus jitter, capped at 10 s) and retries the same
question: a polite client. Requests in flight at the deadline are waited for, and the cell's seconds run until
the last one returns, so ok/s = successful answers / those seconds.

Prints, per cell: successful answers (200 with an `answer`), ok/s, p50/p95 latency of the successful requests,
back-pressure replies (429/503: correct behaviour, counted apart, not errors) and errors: connection errors,
timeouts, 5xx, unexpected 4xx, a 200 without an answer, and 429/503 without a `Retry-After` header. The server's
RSS (VmRSS of its process) is sampled every 0.5 s: the table shows the cell's peak and its value at the end.
Then `errors_total: N`. Writes OUT/server.log.

With `--tracing off on` (the default) every cell runs twice, first against a server without tracing, then
against one with OpenTelemetry on (`OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver in this
process, tests/otlp_receiver.py, which decodes every export), and a last table sets their p50 side by side (goal:
tracing adds at most 5% to p50).

Goal: 0 errors at 32 clients. With the `fixed` pipeline (a small local LLM on 2 cores, seconds per question)
most requests at 32 clients are turned away with 429 + Retry-After: that is the intended back-pressure (runs in
flight are bounded, never queued), not a failure. The exit code is 0 even with errors (it is a benchmark); they
are printed, with examples and the tail of the server log.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from common import ROOT, free_port, wait_until_healthy

from switchyard.evaluation.ranking import percentile
from tests.otlp_receiver import OtlpReceiver

HOST = "127.0.0.1"
SERVER_TIMEOUT_S = 120
RSS_EVERY_S = 0.5
MAX_WAIT_S = 10.0  # cap on a back-off wait
QUESTIONS = [
    "Who patented the knuckle coupler?",
    "What is the Digital Automatic Coupling?",
    "What is standard gauge?",
    "Which gauge does Russia use?",
    "What is a break of gauge?",
    "How are freight cars sorted in a hump yard?",
    "Which yard is the largest classification yard?",
    "What is the difference between a flat yard and a gravity yard?",
    "What is the basic rule of block working?",
    "What does an interlocking prevent?",
    "How fast may cars be humped?",
    "What protects workers on a track?",
]


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        return None
    return None


class RssSampler(threading.Thread):
    """VmRSS of one process every 0.5 s; `take()` gives (peak since the last take, last sample)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self.last = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(RSS_EVERY_S)

    def sample(self) -> None:
        value = rss_mb(self.pid)
        if value is not None:
            with self._lock:
                self.last = value
                self.peak = max(self.peak, value)

    def take(self) -> tuple[float, float]:
        self.sample()
        with self._lock:
            peak, last = self.peak, self.last
            self.peak = last
        return peak, last

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Cell:
    pipeline: str
    clients: int
    tracing: str = "off"
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    abstained: int = 0
    backpressure: Counter = field(default_factory=Counter)  # status -> count
    errors: Counter = field(default_factory=Counter)  # kind -> count
    examples: list[str] = field(default_factory=list)
    hung_clients: int = 0
    rss_peak: float = 0.0
    rss_end: float = 0.0

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        if len(self.examples) < 8:
            self.examples.append(f"{kind}: {detail}")

    @property
    def ok(self) -> int:
        return len(self.latencies_ms)

    @property
    def n_errors(self) -> int:
        return sum(self.errors.values())


def retry_after_s(reply: httpx.Response) -> float | None:
    try:
        value = float(reply.headers["Retry-After"])
    except (KeyError, ValueError):
        return None
    return value if value >= 0 else None


async def client_loop(
    http: httpx.AsyncClient, cell: Cell, next_question, deadline: float, max_requests: int, server: subprocess.Popen
) -> None:
    question = next_question()
    failures = 0  # consecutive back-offs without a Retry-After, for the exponential part
    for _ in range(max_requests):
        now = time.monotonic()
        if now >= deadline or server.poll() is not None:
            return
        started = time.perf_counter()
        wait = 0.0
        try:
            reply = await http.post("/v1/ask", json={"question": question, "pipeline": cell.pipeline})
        except httpx.TimeoutException as exc:
            cell.error("timeout", f"{type(exc).__name__} after {time.perf_counter() - started:.1f} s")
            question = next_question()
            continue
        except httpx.HTTPError as exc:
            cause = exc.__context__
            cell.error(
                "connection",
                f"{type(exc).__name__} {str(exc)!r} after {time.perf_counter() - started:.3f} s"
                + (f" (from {type(cause).__name__}: {cause})" if cause else ""),
            )
            failures += 1
            await asyncio.sleep(min(0.1 * 2**failures, 2.0) * random.uniform(0.5, 1.0))
            question = next_question()
            continue
        ms = (time.perf_counter() - started) * 1000
        status = reply.status_code
        if status == 200:
            try:
                body = reply.json()
            except ValueError:
                body = None
            if isinstance(body, dict) and isinstance(body.get("answer"), str):
                cell.latencies_ms.append(ms)
                cell.abstained += bool(body.get("abstained"))
            else:
                cell.error("bad 200", reply.text[:200])
            failures = 0
            question = next_question()
            continue
        if status in (429, 503):
            cell.backpressure[status] += 1
            after = retry_after_s(reply)
            if after is None:
                cell.error(f"{status} without Retry-After", reply.text[:200])
                failures += 1
                wait = min(0.25 * 2**failures, 4.0) * random.uniform(0.5, 1.0)
            else:
                failures = 0
                wait = min(after * random.uniform(1.0, 1.25), MAX_WAIT_S)  # jitter: no herd at the same instant
            await asyncio.sleep(max(0.0, min(wait, deadline - time.monotonic())))
            continue  # the same question again
        kind = "5xx" if status >= 500 else "unexpected 4xx" if status >= 400 else f"unexpected {status}"
        cell.error(kind, f"{status} after {ms:.0f} ms: {reply.text[:300]}")
        question = next_question()


async def run_cell(url: str, cell: Cell, seconds: float, max_requests: int, server: subprocess.Popen) -> None:
    counter = iter(range(10**12))

    def next_question() -> str:  # round-robin over the list, shared by all clients of the cell
        return QUESTIONS[next(counter) % len(QUESTIONS)]

    limits = httpx.Limits(max_connections=cell.clients, max_keepalive_connections=cell.clients)
    timeout = httpx.Timeout(SERVER_TIMEOUT_S + 30, connect=10)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout, trust_env=False) as http:
        started = time.monotonic()
        deadline = started + seconds
        tasks = [
            asyncio.create_task(client_loop(http, cell, next_question, deadline, max_requests, server))
            for _ in range(cell.clients)
        ]
        # bounded: a request running past the deadline has the server's timeout plus the client's margin to end
        _, pending = await asyncio.wait(tasks, timeout=seconds + SERVER_TIMEOUT_S + 60)
        for task in pending:
            task.cancel()
        cell.hung_clients = len(pending)
        for _ in pending:
            cell.error("hung client", f"still waiting {SERVER_TIMEOUT_S + 60} s after the deadline")
        await asyncio.gather(*pending, return_exceptions=True)
        cell.seconds = time.monotonic() - started


def ingest(index_dir: Path) -> None:
    cmd = [sys.executable, "cli.py", "ingest", "samples/corpus", "--index-dir", str(index_dir), "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"ingest failed (exit {done.returncode}): {shlex.join(cmd)}\n{(done.stdout + done.stderr)[-3000:]}")
    print(f"ingested samples/corpus into {index_dir} in {time.perf_counter() - started:.1f} s")


def server_command(args, index_dir: Path, upload_dir: Path) -> list[str]:
    cmd = [sys.executable, "cli.py", "serve", "--index-dir", str(index_dir)]
    for name in args.pipelines:
        cmd += ["--config", name]
    return cmd + [
        "--host",
        HOST,
        "--port",
        str(args.port),
        "--max-in-flight",
        str(args.max_in_flight),
        "--timeout",
        str(SERVER_TIMEOUT_S),
        "--upload-dir",
        str(upload_dir),
    ]


def start_server(cmd: list[str], url: str, log_path: Path, otlp_endpoint: str | None = None) -> subprocess.Popen:
    env = {
        k: v
        for k, v in os.environ.items()  # no auth for the benchmark; tracing only when asked for
        if k != "SWITCHYARD_API_TOKEN" and not k.startswith("OTEL_EXPORTER_OTLP")
    }
    if otlp_endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
    log = open(log_path, "w")
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()  # the child has its own descriptor
    started = time.perf_counter()
    problem = wait_until_healthy(server, url, timeout_s=300, every_s=0.3)
    if problem is None:
        print(f"server up (pid {server.pid}) in {time.perf_counter() - started:.1f} s: {shlex.join(cmd)}")
        return server
    if server.poll() is None:
        stop_server(server)
    sys.exit(f"the server {problem}:\n{log_tail(log_path)}")


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        print(f"server had already exited with code {server.returncode}")
        return
    started = time.perf_counter()
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=30)
        print(f"server stopped by SIGTERM in {time.perf_counter() - started:.1f} s, exit code {code}")
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        print("server did not stop within 30 s of SIGTERM: killed")


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(server log is empty)"


def warm_up(url: str, pipelines: list[str]) -> None:
    for name in pipelines:
        started = time.perf_counter()
        reply = httpx.post(
            f"{url}/v1/ask",
            json={"question": QUESTIONS[0], "pipeline": name},
            timeout=SERVER_TIMEOUT_S + 30,
            trust_env=False,
        )
        print(f"warm-up {name}: {reply.status_code} in {(time.perf_counter() - started) * 1000:.0f} ms")
        if reply.status_code != 200:
            print(f"  body: {reply.text[:500]}")


def fmt(value: float) -> str:
    return "–" if value != value else f"{value:.0f}"  # NaN when nothing succeeded


def serve_cells(
    args, url: str, index_dir: Path, upload_dir: Path, log_path: Path, tracing: str, otlp_endpoint: str | None
) -> list[Cell]:
    """One server (tracing on or off) and every (pipeline, client count) cell against it."""
    cells: list[Cell] = []
    server = start_server(server_command(args, index_dir, upload_dir), url, log_path, otlp_endpoint)
    sampler = RssSampler(server.pid)
    sampler.start()
    try:
        print(f"tracing {tracing}: server RSS after start: {sampler.take()[1]:.0f} MB")
        warm_up(url, args.pipelines)
        print(f"server RSS after warm-up: {sampler.take()[1]:.0f} MB")
        for pipeline in args.pipelines:
            for clients in args.clients:
                if server.poll() is not None:
                    print(f"the server exited (code {server.returncode}); no further cells")
                    break
                cell = Cell(pipeline, clients, tracing)
                sampler.take()  # the peak restarts here
                asyncio.run(run_cell(url, cell, args.seconds, args.max_requests, server))
                cell.rss_peak, cell.rss_end = sampler.take()
                if server.poll() is not None:
                    cell.error("server exited", f"exit code {server.returncode} during the cell")
                cells.append(cell)
                print(
                    f"{pipeline} x {clients} (tracing {tracing}): {cell.ok} ok, "
                    f"{sum(cell.backpressure.values())} 429/503, {cell.n_errors} errors in {cell.seconds:.1f} s"
                )
                time.sleep(1)  # the server settles between cells
    finally:
        sampler.stop()
        stop_server(server)
    return cells


def print_tracing_overhead(cells: list[Cell], receiver) -> None:
    """p50 with tracing off and on, side by side, for each cell measured both ways."""
    off = {(c.pipeline, c.clients): c for c in cells if c.tracing == "off"}
    pairs = [(off[(c.pipeline, c.clients)], c) for c in cells if c.tracing == "on" and (c.pipeline, c.clients) in off]
    if not pairs:
        return
    print(f"\ntracing overhead ({len(receiver.spans())} spans received, {receiver.requests} OTLP exports)")
    print("\n| pipeline | clients | p50 off ms | p50 on ms | p50 overhead | ok/s off | ok/s on |")
    print("|---|---|---|---|---|---|---|")
    for a, b in pairs:
        p50_off, p50_on = percentile(a.latencies_ms, 50), percentile(b.latencies_ms, 50)
        overhead = f"{(p50_on / p50_off - 1) * 100:+.1f}%" if p50_off else "-"
        print(
            f"| {a.pipeline} | {a.clients} | {fmt(p50_off)} | {fmt(p50_on)} | {overhead} | "
            f"{a.ok / a.seconds:.2f} | {b.ok / b.seconds:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="load time per cell (default 30)")
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--pipelines", nargs="+", default=["no-llm", "fixed"])
    parser.add_argument("--max-in-flight", type=int, default=4, help="the server's --max-in-flight (default 4)")
    parser.add_argument("--port", type=int, default=0, help="server port (0 = a free one)")
    parser.add_argument("--max-requests", type=int, default=10_000, help="per client and cell (default 10000)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "serve_load", help="server.log goes here")
    parser.add_argument("--keep-index", action="store_true", help="keep the temporary index (its path is printed)")
    parser.add_argument(
        "--tracing",
        nargs="+",
        choices=["off", "on"],
        default=["off", "on"],
        help="run every cell without and/or with OpenTelemetry tracing (default: both)",
    )
    args = parser.parse_args()
    args.port = args.port or free_port()
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / "server.log"
    url = f"http://{HOST}:{args.port}"

    tmp = Path(tempfile.mkdtemp(prefix="serve_load-"))
    index_dir = tmp / "index"
    cells: list[Cell] = []
    receiver = OtlpReceiver() if "on" in args.tracing else None
    try:
        ingest(index_dir)
        for tracing in args.tracing:
            endpoint = receiver.origin if tracing == "on" else None
            cells += serve_cells(args, url, index_dir, tmp / "uploads", log_path, tracing, endpoint)
    finally:
        if receiver is not None:
            receiver.close()
        if args.keep_index:
            print(f"index kept: {index_dir}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\nserver: --max-in-flight {args.max_in_flight}, --timeout {SERVER_TIMEOUT_S}; "
        f"{len(QUESTIONS)} questions round-robin; all traffic to {HOST}"
    )
    print(
        "\n| pipeline | clients | tracing | seconds | ok | ok/s | p50 ms | p95 ms | 429/503 | errors | peak RSS MB | "
        "end RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        print(
            f"| {c.pipeline} | {c.clients} | {c.tracing} | {c.seconds:.1f} | {c.ok} | {c.ok / c.seconds:.2f} | "
            f"{fmt(percentile(c.latencies_ms, 50))} | {fmt(percentile(c.latencies_ms, 95))} | "
            f"{sum(c.backpressure.values())} | {c.n_errors} | {c.rss_peak:.0f} | {c.rss_end:.0f} |"
        )
    print_tracing_overhead(cells, receiver)
    print()
    for c in cells:
        codes = ", ".join(f"{n}x{s}" for s, n in sorted(c.backpressure.items())) or "none"
        print(
            f"{c.pipeline} x {c.clients} (tracing {c.tracing}): abstained {c.abstained}/{c.ok}; back-pressure {codes}"
        )
        if c.errors:
            print(f"  errors: {dict(c.errors)}")
            for example in c.examples:
                print(f"    {example}")
    errors_total = sum(c.n_errors for c in cells)
    if errors_total:
        print(f"\nserver log ({log_path}), last lines:\n{log_tail(log_path)}")
    else:
        print(f"\nserver log: {log_path}")
    print(f"\nerrors_total: {errors_total}")
    print(
        "command:",
        shlex.join(
            [
                os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable,
                *sys.argv,
            ]
        ),
    )


if __name__ == "__main__":
    main()
