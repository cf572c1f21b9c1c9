"""Load on the HTTP service with Locust: mixed traffic (ask, search, SSE stream, upload, list) in phases, one server.

    .venv/bin/python bench/serve_load.py
    .venv/bin/python bench/serve_load.py [--phase 64x60 --phase 16x600] [--pipeline no-llm] [--max-in-flight 4]
                                         [--upload-names 200] [--no-uploads] [--tracing off [on]] [--port 0]
                                         [--out bench/out/serve_load] [--keep-index]

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

Goals: 0 errors; RSS growth over the soak (the last phase) at most 10%. The exit code is 0 even with errors (it is
a benchmark); they are printed, with the tail of the server log.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from common import ROOT, cpu_seconds, free_port, rss_mb, wait_until_healthy

from tests.otlp_receiver import OtlpReceiver

HOST = "127.0.0.1"
SERVER_TIMEOUT_S = 120
RSS_EVERY_S = 1.0
SCRATCH = "loadtest"
LOCUSTFILE = ROOT / "bench" / "locustfile.py"
BACKPRESSURE = " [back-pressure]"  # the locustfile's suffix for 429/503 with Retry-After
ROUTES = [  # (method, Locust name): the mix
    ("POST", "/v1/ask"),
    ("POST", "/v1/search"),
    ("POST", "/v1/ask/stream"),
    ("GET", "/v1/collections/{name}/documents"),
    ("POST", "/v1/collections/{name}/documents"),
]
WARM_UP_QUESTION = "Who patented the knuckle coupler?"


class RssSampler(threading.Thread):
    """VmRSS of one process every second: (seconds since start, MB) pairs, and the phase each falls in."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
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
        value = rss_mb(self.pid)
        if value is not None:
            with self._lock:
                self.samples.append((time.monotonic() - self.started, value, self.phase))
        return value

    def of_phase(self, phase: str) -> list[tuple[float, float]]:
        with self._lock:
            return [(t, mb) for t, mb, p in self.samples if p == phase]

    def stop(self) -> None:
        self._stop.set()


def ingest(index_dir: Path) -> None:
    cmd = [sys.executable, "cli.py", "ingest", "samples/corpus", "--index-dir", str(index_dir), "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"ingest failed (exit {done.returncode}): {shlex.join(cmd)}\n{(done.stdout + done.stderr)[-3000:]}")
    print(f"ingested samples/corpus into {index_dir} in {time.perf_counter() - started:.1f} s")


def server_command(args, index_dir: Path, upload_dir: Path) -> list[str]:
    return [
        sys.executable,
        "cli.py",
        "serve",
        "--index-dir",
        str(index_dir),
        "--config",
        args.pipeline,
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


def clean_env() -> dict[str, str]:
    """No auth, no tracing unless asked for, no proxy: the benchmark's server and Locust talk on 127.0.0.1."""
    dropped = ("SWITCHYARD_API_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    return {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in dropped and not k.startswith("OTEL_EXPORTER_OTLP") and not k.startswith("LOCUST_")
    }


def start_server(cmd: list[str], url: str, log_path: Path, otlp_endpoint: str | None) -> subprocess.Popen:
    env = clean_env()
    if otlp_endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
    with open(log_path, "w") as log:  # the child keeps its own descriptor
        server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
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
        code = server.wait(timeout=60)
        print(f"server stopped by SIGTERM in {time.perf_counter() - started:.1f} s, exit code {code}")
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        print("server did not stop within 60 s of SIGTERM: killed")


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"


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


def warm_up(url: str) -> None:
    """One request of each kind (the models load on the first) and a first upload, which creates the scratch
    collection the list task reads; waits for its job."""
    with httpx.Client(base_url=url, timeout=SERVER_TIMEOUT_S + 30, trust_env=False) as http:
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


def run_phase(args, url: str, index: int, users: int, seconds: int, server, sampler: RssSampler) -> dict:
    name = f"phase{index}" + (f"-{args.tracing_now}" if len(args.tracing) > 1 else "")
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
        url,
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
    server_cpu_before = cpu_seconds(server.pid) or 0.0
    children_before = os.times()
    started = time.monotonic()
    print(f"\n{name}: {users} users for {seconds} s: {shlex.join(cmd)}", flush=True)
    with open(args.out / f"{name}-locust.log", "w") as log:
        done = subprocess.run(
            cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=clean_env(), timeout=seconds + 300
        )
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
    return {
        "phase": name,
        "users": users,
        "seconds": seconds,
        "wall_s": round(wall, 1),
        "tracing": args.tracing_now,
        "locust_exit_code": done.returncode,
        "routes": answered,
        "backpressure": {k[: -len(BACKPRESSURE)]: v["requests"] for k, v in routes.items() if k.endswith(BACKPRESSURE)},
        "failures": failures,
        "errors": sum(v["failures"] for v in routes.values()),
        "upload_job_ids": job_ids,
        "load_average_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "cpu_s": {
            "server": round((cpu_seconds(server.pid) or 0.0) - server_cpu_before, 1),
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


def serve_phases(args, url: str, index_dir: Path, upload_dir: Path, otlp_endpoint: str | None) -> dict:
    """One server (tracing on or off), warmed up, and every phase against it; then every upload job read back."""
    log_path = args.out / ("server.log" if len(args.tracing) == 1 else f"server-{args.tracing_now}.log")
    cmd = server_command(args, index_dir, upload_dir)
    server = start_server(cmd, url, log_path, otlp_endpoint)
    sampler = RssSampler(server.pid)
    sampler.start()
    phases: list[dict] = []
    try:
        print(f"tracing {args.tracing_now}: server RSS after start: {sampler.sample():.0f} MB")
        warm_up(url)
        print(f"server RSS after warm-up: {sampler.sample():.0f} MB", flush=True)
        for i, (users, seconds) in enumerate(args.phase, 1):
            if server.poll() is not None:
                print(f"the server exited (code {server.returncode}); no further phases")
                break
            phases.append(run_phase(args, url, i, users, seconds, server, sampler))
            if server.poll() is not None:
                phases[-1]["errors"] += 1
                phases[-1]["failures"].append({"route": "server", "error": "the server exited", "count": 1})
        job_ids = [j for p in phases for j in p["upload_job_ids"]]
        jobs = {"jobs": 0, "states": {}, "file_errors": []}
        if job_ids and server.poll() is None:
            with httpx.Client(base_url=url, timeout=30, trust_env=False) as http:
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
        stop_server(server)
    with open(args.out / ("rss.csv" if len(args.tracing) == 1 else f"rss-{args.tracing_now}.csv"), "w") as fh:
        fh.write("seconds,rss_mb,phase\n")
        fh.writelines(f"{t:.1f},{mb:.1f},{p}\n" for t, mb, p in sampler.samples)
    return {
        "tracing": args.tracing_now,
        "index_mb_after": round(sum(f.stat().st_size for f in index_dir.rglob("*") if f.is_file()) / 2**20, 1),
        "server_command": shlex.join(cmd),
        "server_log": str(log_path),
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


def fmt(value) -> str:
    return "–" if value is None or value != value else f"{value:.0f}"


def print_report(summary: dict) -> None:
    for run in summary["runs"]:
        for p in run["phases"]:
            rss = p["rss_mb"]
            print(
                f"\n{p['phase']}: {p['users']} users x {p['seconds']} s (tracing {p['tracing']}), "
                f"load average {p['load_average_1m'][0]} -> {p['load_average_1m'][1]}, "
                f"CPU s: server {p['cpu_s']['server']}, locust {p['cpu_s']['locust']}"
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
                f"\nserver RSS MB: start {fmt(rss['start'])}, after {rss['warm_up_s']:g} s {fmt(rss['after_warm_up'])},"
                f" end {fmt(rss['end'])}, peak {fmt(rss['peak'])}; growth end vs after warm-up {rss['growth_pct']}%"
                f" ({rss['samples']} samples)"
            )
            for f in p["failures"]:
                print(f"  error x{f['count']}: {f['route']}: {f['error'][:300]}")
        jobs = run["upload_jobs"]
        print(
            f"\nupload jobs (tracing {run['tracing']}): {jobs['jobs']} read back, states {jobs['states']}, "
            f"{len(jobs['file_errors'])} files in error; "
            f"{jobs.get('documents_in_scratch_collection', '–')} documents in {SCRATCH!r}; "
            f"the index takes {run['index_mb_after']} MB on disk"
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
    for run in summary["runs"]:
        if run["phases"]:
            soak = run["phases"][-1]
            growth = soak["rss_mb"]["growth_pct"]
            verdict = "–" if growth is None else "met" if growth <= 10 else "NOT met"
            print(
                f"\nsoak ({soak['phase']}, tracing {run['tracing']}): server RSS growth {growth}% "
                f"(end vs after warm-up; goal <= 10%: {verdict})"
            )
    if summary["errors_total"]:
        for run in summary["runs"]:
            print(f"\nserver log ({run['server_log']}), last lines:\n{log_tail(Path(run['server_log']))}")
    print(f"\nerrors_total: {summary['errors_total']}")
    print(f"summary: {summary['out']}/summary.json")
    print(f"command: {summary['command']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--phase",
        type=phase_spec,
        action="append",
        metavar="USERSxSECONDS",
        help="a Locust phase, in order, on one server (default: 64x60 then the soak 16x600)",
    )
    parser.add_argument("--pipeline", default="no-llm", help="the served and asked pipeline (default no-llm)")
    parser.add_argument("--max-in-flight", type=int, default=4, help="the server's --max-in-flight (default 4)")
    parser.add_argument("--upload-names", type=int, default=200, help="distinct uploaded file names (default 200)")
    parser.add_argument("--no-uploads", action="store_true", help="leave the upload task out of the mix")
    parser.add_argument("--port", type=int, default=0, help="server port (0 = a free one)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "serve_load", help="the outputs' folder")
    parser.add_argument("--keep-index", action="store_true", help="keep the temporary index (its path is printed)")
    parser.add_argument(
        "--tracing",
        nargs="+",
        choices=["off", "on"],
        default=["off"],
        help="run the phases without and/or with OpenTelemetry tracing (default: off)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped benchmark still stops its server
    args.phase = args.phase or [(64, 60), (16, 600)]
    if args.upload_names < 1:
        parser.error("--upload-names must be at least 1")
    if not Path(sys.executable).with_name("locust").is_file():
        sys.exit("locust is not installed in this environment: .venv/bin/python -m pip install locust (the dev extra)")
    args.port = args.port or free_port()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    url = f"http://{HOST}:{args.port}"
    command = shlex.join(
        [os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable, *sys.argv]
    )

    tmp = Path(tempfile.mkdtemp(prefix="serve_load-"))
    index_dir = tmp / "index"
    runs: list[dict] = []
    receiver = OtlpReceiver() if "on" in args.tracing else None
    try:
        ingest(index_dir)
        for tracing in args.tracing:
            args.tracing_now = tracing
            endpoint = receiver.origin if receiver is not None and tracing == "on" else None
            runs.append(serve_phases(args, url, index_dir, tmp / f"uploads-{tracing}", endpoint))
    finally:
        if receiver is not None:
            print(f"OTLP receiver: {len(receiver.spans())} spans in {receiver.requests} exports")
            receiver.close()
        if args.keep_index:
            print(f"index kept: {index_dir}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    errors_total = sum(p["errors"] for run in runs for p in run["phases"]) + sum(
        run["upload_jobs"]["errors"] for run in runs
    )
    summary = {
        "command": command,
        "out": os.path.relpath(args.out, ROOT) if args.out.resolve().is_relative_to(ROOT) else str(args.out),
        "machine": {"cpus": os.cpu_count()},
        "server": {"max_in_flight": args.max_in_flight, "timeout_s": SERVER_TIMEOUT_S, "pipeline": args.pipeline},
        "runs": runs,
        "errors_total": errors_total,
    }
    for run in runs:
        for p in run["phases"]:
            p.pop("upload_job_ids")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print_report(summary)


if __name__ == "__main__":
    main()
