"""Load on the HTTP service with Locust: mixed traffic (ask, search, SSE stream, upload, list) in phases, on one
server or on several behind a load balancer, sharing their state in PostgreSQL, with the database restarted mid-run.

    .venv/bin/python bench/serve_load.py
    .venv/bin/python bench/serve_load.py [--phase 64x60 --phase 16x600] [--pipeline no-llm] [--max-in-flight 4]
                                         [--upload-names 200] [--no-uploads] [--tracing off [on]] [--port 0]
                                         [--out bench/out/serve_load] [--keep-index] [--result NAME]
                                         [--results-dir bench/results]
    .venv/bin/python bench/serve_load.py --servers 1 3 --restart-postgres 20:10     # the many-server layout

The sample corpus (samples/corpus) is ingested into a temporary index (`cli.py ingest`), then one server is started
on 127.0.0.1, open (no API token, no keys): `cli.py serve --config PIPELINE --max-in-flight N --timeout 120
--upload-dir TMP/uploads`, its output to OUT/server.log. It is warmed up (one ask, one search, one stream and one
upload into the scratch collection `loadtest`, waited for until its job is done), then each phase `USERSxSECONDS`
runs Locust headless in its own process against it, one after the other:

    locust -f bench/locustfile.py --headless -u USERS -r USERS/5 -t SECONDSs --host http://127.0.0.1:PORT
           --csv OUT/phaseI --pipeline PIPELINE --run-tag phaseI --summary-file OUT/phaseI-locust.json ...

(users ramp up over the first 5 s). The traffic, its weights, what counts as a success and the polite handling of
429/503 + Retry-After (counted apart as back-pressure, then retried) are bench/locustfile.py's. Meanwhile the
server's RSS (VmRSS) is sampled every second (OUT/rss.csv). After the phases every upload's job is read back
(`GET /v1/jobs/{id}`, waiting up to 120 s for the queue to drain): a job that failed, or a file in error, is an
error too.

Prints, per phase: requests, p50/p95/mean of each route (answered requests only; the stream's time is to its
`answer` event), back-pressure replies, errors (Locust's failures: anything but the route's success and 429/503 with
Retry-After, listed with their messages), the machine's load average and the CPU seconds used by the server and by
Locust, and the server's RSS at the phase's start, after its warm-up (the first sample 30 s in, or a quarter of a
shorter phase), at its end and at its peak, with the growth end vs after warm-up. Then `errors_total: N`. Writes
OUT/summary.json (all of it, per route and phase; read from each phase's final figures, OUT/phaseI-locust.json),
Locust's CSV files (OUT/phaseI_stats_history.csv: the figures over time; its _stats.csv and _failures.csv miss the
last second) and logs (OUT/phaseI-locust.log), OUT/rss.csv and OUT/server.log.

`--no-uploads` leaves the upload task out (its weight 0), to tell the index's growth from a leak in RSS. With
`--tracing off on` all phases run twice, against a server without tracing and then one with OpenTelemetry on
(`OTEL_EXPORTER_OTLP_ENDPOINT` pointing at tests/otlp_receiver.py, an OTLP/HTTP receiver in this process that
decodes every export), and a last table sets their p50 per route side by side (goal: tracing adds at most 5%).

Many servers (`--servers 1 3`: a run per count, one after the other): the layout of docs/deploy.md on 127.0.0.1.
The index is on S3 (moto's server, tests/moto_server.py; the corpus ingested there once), the state in one
PostgreSQL (tests/postgres_server.py: a server of its own in /tmp, run as the postgres user under root; a fresh
database per run, with one admin key that Locust sends, so keys, the audit log, upload jobs and limits go through the
database), and nginx (Debian's package) round-robin over the run's servers, Locust talking to nginx only. Every run
of this mode, one server included, has the same layout, so the runs differ only in the number of servers; the
servers share one `--upload-dir`. Phases default to 64x60. RSS and CPU are the servers' sums.
`--restart-postgres AT:DOWN` adds a last run with the most servers in which, in every phase, PostgreSQL is stopped
(`pg_ctl stop -m fast`) AT s into the phase and started again DOWN s later; every server's /healthz is then polled
every 0.5 s and the time until all answer 200 again is reported, with whether any server exited. Requests during
the outage are answered 503 with Retry-After (back-pressure: Locust waits and sends them again); no request may take
longer than the servers' request timeout (the slowest of all, back-pressure included, is reported), and every
accepted upload must end indexed.

Goals: 0 errors; RSS growth over the soak (the last phase) at most 10%; with a restart, every server back without
a restart of its own. The exit code is 0 even with errors (it is a benchmark); they are printed, with the tail of
the server logs. The figures are recorded in bench/results/serve_load.json (one server; `serve_load_tracing.json`
with `--tracing off on`, `serve_load_servers.json` with `--servers`; or `--result NAME`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import results
from common import ROOT, cpu_seconds, free_port, rss_mb, wait_until_healthy

from tests.moto_server import BUCKET, CREDENTIALS, MotoS3, s3_overrides
from tests.otlp_receiver import OtlpReceiver
from tests.postgres_server import PostgresServer

HOST = "127.0.0.1"
SERVER_TIMEOUT_S = 120
RSS_EVERY_S = 1.0
SCRATCH = "loadtest"
LOCUSTFILE = ROOT / "bench" / "locustfile.py"
BACKPRESSURE = " [back-pressure]"  # the locustfile's suffix for 429/503 with Retry-After
KEY_ENV = "SWITCHYARD_BENCH_KEY"  # the locustfile sends it as a bearer token
WARM_UP_QUESTION = "Who patented the knuckle coupler?"
NGINX_CONF = """\
{user}worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  client_max_body_size 64m;
  upstream switchyard {{
{upstream}
    keepalive 64;
  }}
  server {{
    listen {host}:{port};
    location / {{
      proxy_pass http://switchyard;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout {timeout}s;
      proxy_send_timeout {timeout}s;
    }}
  }}
}}
"""


@dataclass
class Run:
    """One set of servers under every phase: how many, traced or not, and PostgreSQL's restart (AT, DOWN) if any."""

    name: str
    servers: int
    tracing: str = "off"
    restart: tuple[int, int] | None = None


@dataclass
class Servers:
    procs: list[subprocess.Popen]
    urls: list[str]  # each server's own
    url: str  # where Locust sends: the one server, or the load balancer
    logs: list[Path]
    commands: list[str]
    key: str | None = None  # the admin key of the many-server layout


class RssSampler(threading.Thread):
    """The servers' summed VmRSS every second: (seconds since start, MB) pairs, and the phase each falls in."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids = pids
        self.started = time.monotonic()
        self.samples: list[tuple[float, float, str]] = []
        self.phase = "start"
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(RSS_EVERY_S)

    def sample(self) -> float | None:
        values = [rss_mb(pid) for pid in self.pids]
        if any(v is None for v in values):
            return None
        value = sum(values)
        with self._lock:
            self.samples.append((time.monotonic() - self.started, value, self.phase))
        return value

    def of_phase(self, phase: str) -> list[tuple[float, float]]:
        with self._lock:
            return [(t, mb) for t, mb, p in self.samples if p == phase]

    def stop(self) -> None:
        self._stop.set()


class Deployment:
    """The many-server layout of docs/deploy.md on 127.0.0.1: the index on S3 (moto's server), the state in
    PostgreSQL, nginx round-robin in front of the servers of a run."""

    index = f"s3://{BUCKET}/index"

    def __init__(self, out: Path):
        self.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(self.nginx).is_file():
            sys.exit("nginx is not installed: apt-get install nginx-light (Debian), or leave --servers out")
        self.out = out
        self.prefix = Path(tempfile.mkdtemp(prefix="serve_load-nginx-"))
        self.postgres = PostgresServer()
        self.postgres.start()
        try:
            self.s3 = MotoS3(out / "moto.log")
        except BaseException:
            self.postgres.close()
            raise
        self.balancer: subprocess.Popen | None = None

    def overrides(self) -> list[str]:
        """`--set` arguments of the index on S3 (its URI is the --index-dir)."""
        return [a for o in s3_overrides(self.s3.endpoint) if not o.startswith("store.uri=") for a in ("--set", o)]

    def state(self) -> tuple[str, str]:
        """A new state database and an admin key in it (`cli.py keys create --state`): (URL, key)."""
        url = self.postgres.database()
        cmd = [sys.executable, "cli.py", "keys", "create", "bench", "--admin", "--state", url]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"cannot make the benchmark's key: {done.stderr.strip()}")
        return url, done.stdout.strip()

    def balance(self, port: int, upstream: list[str]) -> str:
        """nginx on `port`, round-robin over the `upstream` URLs; its URL once it answers /healthz."""
        conf = self.prefix / "nginx.conf"
        conf.write_text(
            NGINX_CONF.format(
                user="user root;\n" if os.geteuid() == 0 else "",  # its workers write the temp folders here
                prefix=self.prefix,
                upstream="\n".join(f"    server {u.removeprefix('http://')};" for u in upstream),
                host=HOST,
                port=port,
                timeout=SERVER_TIMEOUT_S + 30,
            )
        )
        cmd = [self.nginx, "-p", str(self.prefix), "-e", str(self.prefix / "error.log"), "-c", str(conf)]
        with open(self.out / "nginx.log", "a") as log:
            self.balancer = subprocess.Popen([*cmd, "-g", "daemon off;"], stdout=log, stderr=subprocess.STDOUT)
        url = f"http://{HOST}:{port}"
        problem = wait_until_healthy(self.balancer, url, timeout_s=30)
        if problem:
            sys.exit(f"nginx {problem}:\n{log_tail(self.prefix / 'error.log')}")
        print(f"nginx (pid {self.balancer.pid}) on {url}, round-robin over {len(upstream)} server(s)")
        return url

    def unbalance(self) -> None:
        if self.balancer is not None and self.balancer.poll() is None:
            self.balancer.send_signal(signal.SIGQUIT)  # nginx's graceful stop
            try:
                self.balancer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.balancer.kill()
                self.balancer.wait()
        self.balancer = None

    def close(self) -> None:
        self.unbalance()
        self.s3.close()
        self.postgres.close()
        shutil.rmtree(self.prefix, ignore_errors=True)


class Outage(threading.Thread):
    """Stops PostgreSQL `at` s after it starts and starts it again `down` s after the stop began; from the stop until
    every server's /healthz answers 200 again (at most 120 s), polls each server every 0.5 s: one restart's figures."""

    def __init__(self, postgres: PostgresServer, at: int, down: int, urls: list[str]):
        super().__init__(daemon=True)
        self.postgres, self.at, self.down, self.urls = postgres, at, down, urls
        self.cancelled = threading.Event()
        self.figures: dict = {}
        self._polls: dict[str, list[tuple[float, int]]] = {url: [] for url in urls}
        self._polling = threading.Event()

    def _poll(self, url: str) -> None:
        with httpx.Client(timeout=10, trust_env=False) as http:
            while self._polling.is_set():
                try:
                    code = http.get(f"{url}/healthz").status_code
                except httpx.HTTPError:
                    code = 0
                self._polls[url].append((time.monotonic(), code))
                time.sleep(0.5)

    def _first_200_after(self, started: float) -> list[float | None]:
        return [
            min((t for t, code in list(p) if t >= started and code == 200), default=None) for p in self._polls.values()
        ]

    def run(self) -> None:
        if self.cancelled.wait(self.at):
            return
        self._polling.set()
        pollers = [threading.Thread(target=self._poll, args=(url,), daemon=True) for url in self.urls]
        for poller in pollers:
            poller.start()
        stopping = time.monotonic()
        self.postgres.stop("fast")
        print(f"  PostgreSQL stopped ({time.monotonic() - stopping:.1f} s)", flush=True)
        time.sleep(max(0.0, stopping + self.down - time.monotonic()))
        self.postgres.start()
        started = time.monotonic()
        print(f"  PostgreSQL started again {started - stopping:.1f} s after the stop began", flush=True)
        while time.monotonic() - started < 120 and None in self._first_200_after(started):
            time.sleep(0.2)
        self._polling.clear()
        for poller in pollers:
            poller.join(timeout=15)
        back = self._first_200_after(started)
        self.figures = {
            "stopped_at_s": self.at,
            "down_s": round(started - stopping, 1),
            "healthz_codes_seen": sorted({code for p in self._polls.values() for _, code in p}),
            "all_healthy_after_start_s": None if None in back else round(max(back) - started, 1),  # type: ignore[type-var]
        }
        print(
            f"  every server healthy again: {self.figures['all_healthy_after_start_s']} s after the start", flush=True
        )


def slug(run: Run) -> str:
    """The run's name in file names: "3-servers-PostgreSQL-restarted"."""
    return re.sub(r"\W+", "-", run.name).strip("-")


def ingest(index: str, extra: list[str], env: dict[str, str]) -> None:
    cmd = [sys.executable, "cli.py", "ingest", "samples/corpus", "--index-dir", index, "--no-progress", *extra]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"ingest failed (exit {done.returncode}): {shlex.join(cmd)}\n{(done.stdout + done.stderr)[-3000:]}")
    print(f"ingested samples/corpus into {index} in {time.perf_counter() - started:.1f} s")


def server_command(args, index: str, upload_dir: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "cli.py",
        "serve",
        "--index-dir",
        index,
        "--config",
        args.pipeline,
        "--host",
        HOST,
        "--port",
        str(port),
        "--max-in-flight",
        str(args.max_in_flight),
        "--timeout",
        str(SERVER_TIMEOUT_S),
        "--upload-dir",
        str(upload_dir),
    ]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """No auth, no tracing unless asked for, no proxy: the benchmark's servers and Locust talk on 127.0.0.1."""
    dropped = ("SWITCHYARD_API_TOKEN", "SWITCHYARD_STATE_URL", KEY_ENV, "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    env = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in dropped and not k.startswith("OTEL_EXPORTER_OTLP") and not k.startswith("LOCUST_")
    }
    return {**env, **(extra or {})}


def start_servers(
    args, run: Run, layout: Deployment | None, index: str, upload_dir: Path, otlp_endpoint: str | None
) -> Servers:
    """The run's servers, started together and waited for; with the layout, behind nginx on args.port."""
    env = clean_env({"PYTHONFAULTHANDLER": "1"})
    if otlp_endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
    key = None
    if layout is None:
        ports, extra = [args.port], []
    else:
        ports = [free_port() for _ in range(run.servers)]
        url, key = layout.state()
        extra = ["--state", url, *layout.overrides()]
        env.update(CREDENTIALS)
    servers = Servers([], [f"http://{HOST}:{p}" for p in ports], "", [], [], key)
    started = time.perf_counter()
    for i, port in enumerate(ports):
        cmd = server_command(args, index, upload_dir, port) + extra
        log_path = args.out / (f"server-{slug(run)}-{i}.log" if args.many_runs or layout else "server.log")
        with open(log_path, "w") as log:  # the child keeps its own descriptor
            servers.procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env))
        servers.logs.append(log_path)
        servers.commands.append(shlex.join(cmd))
    for proc, url, log_path in zip(servers.procs, servers.urls, servers.logs):
        problem = wait_until_healthy(proc, url, timeout_s=300, every_s=0.3)
        if problem is not None:
            if proc.poll() is None:  # hung: PYTHONFAULTHANDLER writes every thread's stack to its log on SIGABRT
                proc.send_signal(signal.SIGABRT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
            stop_servers(servers, layout)
            sys.exit(f"a server {problem}:\n{log_tail(log_path, 80)}")
    print(f"{len(ports)} server(s) up in {time.perf_counter() - started:.1f} s: {servers.commands[0]}")
    servers.url = layout.balance(args.port, servers.urls) if layout else servers.urls[0]
    return servers


def stop_servers(servers: Servers, layout: Deployment | None) -> None:
    if layout is not None:
        layout.unbalance()
    started = time.perf_counter()
    for proc in servers.procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in servers.procs:
        try:
            code = proc.wait(timeout=60)
            print(f"server {proc.pid} stopped in {time.perf_counter() - started:.1f} s, exit code {code}")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            print(f"server {proc.pid} did not stop within 60 s of SIGTERM: killed")


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"


def client(servers: Servers, timeout: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {servers.key}"} if servers.key else {}
    return httpx.Client(base_url=servers.url, headers=headers, timeout=timeout, trust_env=False)


def wait_for_jobs(http: httpx.Client, job_ids: list[str], budget_s: float) -> dict:
    """Reads every job back, waiting (up to budget_s in all) for the queued and running ones to finish."""
    deadline = time.monotonic() + budget_s
    states: dict[str, dict] = {}
    pending = list(job_ids)
    while pending:
        still = []
        for job_id in pending:
            reply = http.get(f"/v1/jobs/{job_id}")
            body = reply.json() if reply.status_code == 200 else {"state": f"HTTP {reply.status_code}", "files": []}
            states[job_id] = body
            if body.get("state") in ("queued", "running"):
                still.append(job_id)
        pending = still
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    counts: dict[str, int] = {}
    file_errors: list[str] = []
    for body in states.values():
        counts[body.get("state", "?")] = counts.get(body.get("state", "?"), 0) + 1
        for f in body.get("files") or []:
            if f.get("status") == "error":
                file_errors.append(f"{f.get('name')}: {f.get('error')}")
    return {"jobs": len(job_ids), "states": counts, "file_errors": file_errors}


def warm_up(servers: Servers) -> None:
    """One request of each kind (the models load on the first) and a first upload, which creates the scratch
    collection the list task reads; waits for its job."""
    with client(servers, SERVER_TIMEOUT_S + 30) as http:
        for method, path, kwargs in [
            ("POST", "/v1/ask", {"json": {"question": WARM_UP_QUESTION}}),
            ("POST", "/v1/search", {"json": {"query": "knuckle coupler"}}),
            ("POST", "/v1/ask/stream", {"json": {"question": WARM_UP_QUESTION}}),
            ("POST", f"/v1/collections/{SCRATCH}/documents", {"files": {"files": ("seed.md", b"# Seed\n\nA seed.\n")}}),
        ]:
            started = time.perf_counter()
            reply = http.request(method, path, **kwargs)
            print(f"warm-up {method} {path}: {reply.status_code} in {(time.perf_counter() - started) * 1000:.0f} ms")
            if reply.status_code >= 300:
                sys.exit(f"warm-up failed: {reply.text[:500]}")
        job = wait_for_jobs(http, [reply.json()["job_id"]], budget_s=120)
        if job["states"] != {"done": 1} or job["file_errors"]:
            sys.exit(f"the warm-up upload did not index: {job}")


def run_phase(
    args, run: Run, index: int, users: int, seconds: int, servers: Servers, sampler: RssSampler, layout
) -> dict:
    name = f"phase{index}" + (f"-{run.tracing}" if len(args.tracing) > 1 else "")
    if layout is not None:
        name += f"-{run.servers}s" + ("-restart" if run.restart else "")
    prefix = args.out / name
    summary_file = args.out / f"{name}-locust.json"
    spawn_rate = max(1.0, users / 5)
    cmd = [
        str(Path(sys.executable).with_name("locust")),
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--users",
        str(users),
        "--spawn-rate",
        f"{spawn_rate:g}",
        "--run-time",
        f"{seconds}s",
        "--stop-timeout",
        "30",
        "--host",
        servers.url,
        "--csv",
        str(prefix),
        "--csv-full-history",
        "--only-summary",
        "--pipeline",
        args.pipeline,
        "--scratch-collection",
        SCRATCH,
        "--upload-names",
        str(args.upload_names),
        "--run-tag",
        name,
        "--summary-file",
        str(summary_file),
    ]
    if args.no_uploads:
        cmd += ["--exclude-tags", "upload"]
    sampler.phase = name
    load_before = os.getloadavg()
    servers_cpu_before = sum(cpu_seconds(p.pid) or 0.0 for p in servers.procs)
    children_before = os.times()
    outage = None
    if run.restart and layout is not None:
        outage = Outage(layout.postgres, *run.restart, servers.urls)
    started = time.monotonic()
    print(f"\n{name}: {users} users for {seconds} s: {shlex.join(cmd)}", flush=True)
    with open(args.out / f"{name}-locust.log", "w") as log:
        if outage is not None:
            outage.start()
        env = clean_env({KEY_ENV: servers.key} if servers.key else None)
        done = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=seconds + 300)
    if outage is not None:
        outage.cancelled.set()
        outage.join()
    wall = time.monotonic() - started
    children_after = os.times()
    sampler.sample()
    sampler.phase = "between"
    load_after = os.getloadavg()
    if done.returncode not in (0, 1):  # 1: Locust ran and saw failures
        print(f"locust exited with code {done.returncode}:\n{log_tail(args.out / f'{name}-locust.log')}")
    if not summary_file.is_file():
        sys.exit(f"locust wrote no {summary_file.name}:\n{log_tail(args.out / f'{name}-locust.log')}")
    final = json.loads(summary_file.read_text())
    routes, failures, job_ids = final["routes"], final["failures"], final["upload_job_ids"]
    rss = sampler.of_phase(name)
    warm = min(30.0, seconds / 4)
    t0 = rss[0][0] if rss else 0.0
    after_warm = next((mb for t, mb in rss if t - t0 >= warm), rss[-1][1] if rss else float("nan"))
    end = rss[-1][1] if rss else float("nan")
    answered = {k: v for k, v in routes.items() if not k.endswith(BACKPRESSURE)}
    figures = {
        "phase": name,
        "users": users,
        "seconds": seconds,
        "wall_s": round(wall, 1),
        "tracing": run.tracing,
        "servers": run.servers,
        "locust_exit_code": done.returncode,
        "routes": answered,
        "backpressure": {k[: -len(BACKPRESSURE)]: v["requests"] for k, v in routes.items() if k.endswith(BACKPRESSURE)},
        "slowest_reply_ms": max((v["max_ms"] for v in routes.values()), default=None),
        "failures": failures,
        "errors": sum(v["failures"] for v in routes.values()),
        "upload_job_ids": job_ids,
        "load_average_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "cpu_s": {
            "servers": round(sum(cpu_seconds(p.pid) or 0.0 for p in servers.procs) - servers_cpu_before, 1),
            "locust": round(
                (children_after.children_user + children_after.children_system)
                - (children_before.children_user + children_before.children_system),
                1,
            ),
        },
        "rss_mb": {
            "samples": len(rss),
            "start": round(rss[0][1], 1) if rss else None,
            "after_warm_up": round(after_warm, 1),
            "warm_up_s": warm,
            "end": round(end, 1),
            "peak": round(max(mb for _, mb in rss), 1) if rss else None,
            "growth_pct": round((end / after_warm - 1) * 100, 2) if rss else None,
        },
    }
    if outage is not None:
        figures["outage"] = outage.figures
        back = outage.figures.get("all_healthy_after_start_s")
        if back is None:
            figures["errors"] += 1
            failures.append({"route": "/healthz", "error": "a server not healthy 120 s after the restart", "count": 1})
        if (figures["slowest_reply_ms"] or 0) > SERVER_TIMEOUT_S * 1000:
            figures["errors"] += 1
            failures.append({"route": "any", "error": "a reply slower than the request timeout", "count": 1})
    return figures


def serve_phases(args, run: Run, layout: Deployment | None, index: str, upload_dir: Path, otlp: str | None) -> dict:
    """The run's servers, warmed up, and every phase against them; then every upload job read back."""
    servers = start_servers(args, run, layout, index, upload_dir, otlp)
    sampler = RssSampler([p.pid for p in servers.procs])
    sampler.start()
    phases: list[dict] = []
    exited = lambda: [p.pid for p in servers.procs if p.poll() is not None]  # noqa: E731
    try:
        print(f"{run.name}: servers' RSS after start: {sampler.sample():.0f} MB")
        warm_up(servers)
        print(f"servers' RSS after warm-up: {sampler.sample():.0f} MB", flush=True)
        for i, (users, seconds) in enumerate(args.phase, 1):
            if exited():
                print(f"server(s) {exited()} exited; no further phases")
                break
            phases.append(run_phase(args, run, i, users, seconds, servers, sampler, layout))
            if exited():
                phases[-1]["errors"] += 1
                phases[-1]["failures"].append({"route": "server", "error": f"{exited()} exited", "count": 1})
        job_ids = [j for p in phases for j in p["upload_job_ids"]]
        jobs = {"jobs": 0, "states": {}, "file_errors": []}
        if job_ids and not exited():
            with client(servers, 30) as http:
                jobs = wait_for_jobs(http, job_ids, budget_s=120)
                listed = http.get(f"/v1/collections/{SCRATCH}/documents").json()
            jobs["documents_in_scratch_collection"] = len(listed)
        jobs["errors"] = (
            sum(n for state, n in jobs["states"].items() if state != "done")
            + len(jobs["file_errors"])
            + (len(job_ids) - jobs["jobs"])
        )
    finally:
        sampler.stop()
        stop_servers(servers, layout)
    with open(args.out / (f"rss-{slug(run)}.csv" if args.many_runs else "rss.csv"), "w") as fh:
        fh.write("seconds,rss_mb,phase\n")
        fh.writelines(f"{t:.1f},{mb:.1f},{p}\n" for t, mb, p in sampler.samples)
    local = None if index.startswith("s3://") else Path(index)
    return {
        "name": run.name,
        "servers": run.servers,
        "tracing": run.tracing,
        "restart_postgres": list(run.restart) if run.restart else None,
        "index_mb_after": round(sum(f.stat().st_size for f in local.rglob("*") if f.is_file()) / 2**20, 1)
        if local
        else None,
        "server_command": servers.commands[0],
        "server_logs": [str(p) for p in servers.logs],
        "phases": phases,
        "upload_jobs": jobs,
    }


def phase_spec(text: str) -> tuple[int, int]:
    try:
        users, seconds = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not USERSxSECONDS, e.g. 64x60") from None
    if users < 1 or seconds < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: users and seconds must be at least 1")
    return users, seconds


def restart_spec(text: str) -> tuple[int, int]:
    try:
        at, down = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not AT:DOWN in seconds, e.g. 20:10") from None
    if at < 1 or down < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: both must be at least 1 s")
    return at, down


def fmt(value) -> str:
    return "–" if value is None or value != value else f"{value:.0f}"


def print_report(summary: dict) -> None:
    for run in summary["runs"]:
        for p in run["phases"]:
            rss = p["rss_mb"]
            print(
                f"\n{run['name']}, {p['phase']}: {p['users']} users x {p['seconds']} s (tracing {p['tracing']}), "
                f"load average {p['load_average_1m'][0]} -> {p['load_average_1m'][1]}, "
                f"CPU s: servers {p['cpu_s']['servers']}, locust {p['cpu_s']['locust']}"
            )
            print("\n| route | requests | req/s | p50 ms | p95 ms | mean ms | back-pressure | errors |")
            print("|---|---|---|---|---|---|---|---|")
            for route, r in p["routes"].items():
                bp = p["backpressure"].get(route, 0)
                print(
                    f"| {route} | {r['requests']} | {r['rps']:.2f} | {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | "
                    f"{fmt(r['mean_ms'])} | {bp} | {r['failures']} |"
                )
            print(
                f"\nservers' RSS MB: start {fmt(rss['start'])}, after {rss['warm_up_s']:g} s "
                f"{fmt(rss['after_warm_up'])}, end {fmt(rss['end'])}, peak {fmt(rss['peak'])}; growth end vs after "
                f"warm-up {rss['growth_pct']}% ({rss['samples']} samples); slowest reply {fmt(p['slowest_reply_ms'])} ms"
            )
            if "outage" in p:
                o = p["outage"]
                print(
                    f"PostgreSQL stopped {o.get('stopped_at_s')} s in for {o.get('down_s')} s; /healthz codes seen "
                    f"{o.get('healthz_codes_seen')}; every server healthy {o.get('all_healthy_after_start_s')} s "
                    f"after the start"
                )
            for f in p["failures"]:
                print(f"  error x{f['count']}: {f['route']}: {f['error'][:300]}")
        jobs = run["upload_jobs"]
        print(
            f"\nupload jobs ({run['name']}, tracing {run['tracing']}): {jobs['jobs']} read back, states "
            f"{jobs['states']}, {len(jobs['file_errors'])} files in error; "
            f"{jobs.get('documents_in_scratch_collection', '–')} documents in {SCRATCH!r}"
            + (f"; the index takes {run['index_mb_after']} MB on disk" if run["index_mb_after"] is not None else "")
        )
        for line in jobs["file_errors"][:8]:
            print(f"  {line}")
    tracing = {run["tracing"]: run for run in summary["runs"]}
    if {"off", "on"} <= tracing.keys():
        print("\ntracing overhead, p50 per route and phase")
        print("\n| phase | route | p50 off ms | p50 on ms | overhead |")
        print("|---|---|---|---|---|")
        for off, on in zip(tracing["off"]["phases"], tracing["on"]["phases"]):
            for route, r in off["routes"].items():
                if route in on["routes"]:
                    a, b = r["p50_ms"], on["routes"][route]["p50_ms"]
                    over = f"{(b / a - 1) * 100:+.1f}%" if a else "–"
                    print(f"| {off['users']}x{off['seconds']} | {route} | {fmt(a)} | {fmt(b)} | {over} |")
    if len({run["servers"] for run in summary["runs"]}) > 1 and summary["runs"][0]["phases"]:
        import tables

        print(f"\nfirst phase, run by run\n\n{tables.servers_comparison(summary)}")
    for run in summary["runs"]:
        if run["phases"] and len(summary["phases"]) > 1:
            soak = run["phases"][-1]
            growth = soak["rss_mb"]["growth_pct"]
            verdict = "–" if growth is None else "met" if growth <= 10 else "NOT met"
            print(
                f"\nsoak ({soak['phase']}, {run['name']}): servers' RSS growth {growth}% "
                f"(end vs after warm-up; goal <= 10%: {verdict})"
            )
    if summary["errors_total"]:
        for run in summary["runs"]:
            for log in run["server_logs"]:
                print(f"\nserver log ({log}), last lines:\n{log_tail(Path(log))}")
    print(f"\nerrors_total: {summary['errors_total']}")
    print(f"summary: {summary['out']}/summary.json")
    print(f"command: {summary['command']}")


def plan(args) -> list[Run]:
    if args.layout:
        runs = [Run(f"{n} server{'s' if n > 1 else ''}", n) for n in args.servers]
        if args.restart_postgres:
            most = max(args.servers)
            runs.append(Run(f"{most} servers, PostgreSQL restarted", most, restart=args.restart_postgres))
        return runs
    return [Run("one server" if t == "off" else "one server, traced", 1, tracing=t) for t in args.tracing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--phase",
        type=phase_spec,
        action="append",
        metavar="USERSxSECONDS",
        help="a Locust phase, in order, on each set of servers (default: 64x60 then the soak 16x600; with "
        "--servers, 64x60)",
    )
    parser.add_argument("--pipeline", default="no-llm", help="the served and asked pipeline (default no-llm)")
    parser.add_argument("--max-in-flight", type=int, default=4, help="each server's --max-in-flight (default 4)")
    parser.add_argument("--upload-names", type=int, default=200, help="distinct uploaded file names (default 200)")
    parser.add_argument("--no-uploads", action="store_true", help="leave the upload task out of the mix")
    parser.add_argument("--port", type=int, default=0, help="the port Locust sends to (0 = a free one)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "serve_load", help="the outputs' folder")
    parser.add_argument("--keep-index", action="store_true", help="keep the temporary index (its path is printed)")
    parser.add_argument(
        "--tracing",
        nargs="+",
        choices=["off", "on"],
        default=["off"],
        help="run the phases without and/or with OpenTelemetry tracing (default: off; one server)",
    )
    parser.add_argument(
        "--servers",
        type=int,
        nargs="+",
        metavar="N",
        help="the many-server layout (S3 index, PostgreSQL state, nginx): a run per count, e.g. 1 3",
    )
    parser.add_argument(
        "--restart-postgres",
        type=restart_spec,
        metavar="AT:DOWN",
        help="with --servers: a last run with the most servers, PostgreSQL stopped AT s into each phase for DOWN s",
    )
    parser.add_argument(
        "--result",
        help="the result's name (default serve_load; serve_load_servers with --servers, serve_load_tracing with "
        "--tracing off on)",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=results.RESULTS, help="where the result file goes (default bench/results)"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped benchmark still stops its servers
    args.layout = bool(args.servers)
    if args.layout and (len(args.tracing) > 1 or args.tracing != ["off"]):
        parser.error("--tracing is measured on one server: leave it out with --servers")
    if args.restart_postgres and not args.layout:
        parser.error("--restart-postgres needs --servers (the many-server layout)")
    if args.layout and min(args.servers) < 1:
        parser.error("--servers: each count must be at least 1")
    args.phase = args.phase or ([(64, 60)] if args.layout else [(64, 60), (16, 600)])
    if args.restart_postgres and any(sum(args.restart_postgres) + 5 > s for _, s in args.phase):
        parser.error("--restart-postgres AT:DOWN must end at least 5 s before every phase does")
    if args.upload_names < 1:
        parser.error("--upload-names must be at least 1")
    if not Path(sys.executable).with_name("locust").is_file():
        sys.exit("locust is not installed in this environment: .venv/bin/python -m pip install locust (the dev extra)")
    args.port = args.port or free_port()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    command = shlex.join(
        [os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable, *sys.argv]
    )

    runs_planned = plan(args)
    args.many_runs = len(runs_planned) > 1
    tmp = Path(tempfile.mkdtemp(prefix="serve_load-"))
    runs: list[dict] = []
    receiver = OtlpReceiver() if "on" in args.tracing else None
    layout = None
    try:
        if args.layout:
            layout = Deployment(args.out)
            index = layout.index
            ingest(index, layout.overrides(), clean_env(CREDENTIALS))
        else:
            index = str(tmp / "index")
            ingest(index, [], clean_env())
        for run in runs_planned:
            endpoint = receiver.origin if receiver is not None and run.tracing == "on" else None
            upload_dir = tmp / ("uploads" if layout else f"uploads-{run.tracing}")  # one path for all the servers
            print(f"\n== {run.name} ==", flush=True)
            runs.append(serve_phases(args, run, layout, index, upload_dir, endpoint))
    finally:
        if receiver is not None:
            print(f"OTLP receiver: {len(receiver.spans())} spans in {receiver.requests} exports")
            receiver.close()
        if layout is not None:
            layout.close()
        if args.keep_index and not args.layout:
            print(f"index kept: {tmp / 'index'}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    errors_total = sum(p["errors"] for run in runs for p in run["phases"]) + sum(
        run["upload_jobs"]["errors"] for run in runs
    )
    for run in runs:
        for p in run["phases"]:
            p.pop("upload_job_ids")
    summary = {
        "command": command,
        "out": os.path.relpath(args.out, ROOT) if args.out.resolve().is_relative_to(ROOT) else str(args.out),
        "machine": {"cpus": os.cpu_count()},
        "server": {"max_in_flight": args.max_in_flight, "timeout_s": SERVER_TIMEOUT_S, "pipeline": args.pipeline},
        "phases": [f"{u}x{s}" for u, s in args.phase],
        "runs": runs,
        "errors_total": errors_total,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print_report(summary)
    default = "serve_load_servers" if args.layout else "serve_load_tracing" if len(args.tracing) > 1 else "serve_load"
    name = args.result or default
    figures = {k: v for k, v in summary.items() if k not in ("command", "out")}
    for run in figures["runs"]:
        run.pop("server_logs")
    dropped = ("port", "out", "many_runs", "results_dir")
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in dropped}
    print(f"wrote {results.record(name, figures, config, args.results_dir)}")


if __name__ == "__main__":
    main()
