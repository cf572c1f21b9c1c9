"""bench/serve_load.py and its locustfile (bench/locustfile.py): the Locust users' verdicts against a scripted server
(back-pressure with Retry-After counted apart and retried, everything else that is not the route's success a
failure), and the driver, bounded, against a real `cli.py serve`: every route of the mix exercised, 0 errors, the
server's RSS sampled, the summary's per-route p50/p95. Figures are the benchmark's, not asserted here."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.canned_server import LoopbackServer, QuietHandler

ROOT = Path(__file__).resolve().parents[2]
LOCUST = Path(sys.executable).with_name("locust")
ROUTES = {
    "POST /v1/ask",
    "POST /v1/search",
    "POST /v1/ask/stream",
    "GET /v1/collections/{name}/documents",
    "POST /v1/collections/{name}/documents",
}

needs_locust = pytest.mark.skipif(not LOCUST.is_file(), reason="locust is not installed (the dev extra)")


class ScriptedService(QuietHandler):
    """ask: 429 with Retry-After: 0, then 200 with an answer, alternately; search: 429 without Retry-After; stream:
    200 whose events end with `error`; list: 500; upload: 202 with a job id."""

    turn = itertools.count()
    lock = threading.Lock()

    def _json(self, body, status: int = 200, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 - the http.server API
        self.read_body()
        if self.path == "/v1/ask":
            with self.lock:
                busy = next(self.turn) % 2 == 0
            if busy:
                self._json({"detail": "4 runs are in flight; retry shortly"}, 429, {"Retry-After": "0"})
            else:
                self._json({"answer": "an answer", "abstained": False})
        elif self.path == "/v1/search":
            self._json({"detail": "busy"}, 429)
        elif self.path == "/v1/ask/stream":
            body = b'event: start\ndata: {}\n\nevent: error\ndata: {"detail": "boom"}\n\n'
            self.send_body(body, "text/event-stream")
        else:
            self._json({"job_id": "job-" + self.path.split("/")[3], "status_url": "/v1/jobs/x", "files": []}, 202)

    def do_GET(self):  # noqa: N802 - the http.server API
        self._json({"detail": "internal error: RuntimeError: boom"}, 500)


@pytest.mark.slow
@needs_locust
def test_the_locustfile_counts_back_pressure_apart_and_everything_else_that_is_not_a_success_as_a_failure(tmp_path):
    summary = tmp_path / "run.json"
    with LoopbackServer(ScriptedService) as server:
        # 12 users for 8 s draw ~80 tasks: the list task (weight 1 in 10) is drawn in all but ~1 run in 7,000
        cmd = [str(LOCUST), "-f", str(ROOT / "bench" / "locustfile.py"), "--headless", "-u", "12", "-r", "12"]
        cmd += ["-t", "8s", "--host", server.origin, "--only-summary", "--summary-file", str(summary)]
        cmd += ["--scratch-collection", "scratch"]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # Locust's exit code when requests failed
    final = json.loads(summary.read_text())
    stats, failures = final["routes"], final["failures"]

    ask, pushed_back = stats["POST /v1/ask"], stats["POST /v1/ask [back-pressure]"]
    assert ask["requests"] > 0 and ask["failures"] == 0  # every turned-away ask was sent again
    assert pushed_back["requests"] > 0 and pushed_back["failures"] == 0
    # the back-pressure replies are not in the route's own counts: each answered ask followed one turned away
    assert abs(pushed_back["requests"] - ask["requests"]) <= 12

    by_route = {f["route"]: f["error"] for f in failures}
    search = stats["POST /v1/search"]
    assert search["requests"] > 0 and search["failures"] == search["requests"]
    assert "429 without Retry-After" in by_route["POST /v1/search"]
    assert "POST /v1/search [back-pressure]" not in stats
    assert stats["POST /v1/ask/stream"]["failures"] == stats["POST /v1/ask/stream"]["requests"]
    assert "error event" in by_route["POST /v1/ask/stream"]
    assert "500" in by_route["GET /v1/collections/{name}/documents"]
    upload = stats["POST /v1/collections/{name}/documents"]
    assert upload["requests"] > 0 and upload["failures"] == 0
    # the figures are the run's final ones: every 202 read is counted (Locust's --csv files miss the last second)
    assert final["upload_job_ids"] == ["job-scratch"] * upload["requests"]
    assert ask["p50_ms"] <= ask["p95_ms"]


@pytest.mark.slow
@needs_locust
def test_serve_load_runs_the_mix_against_a_real_server_bounded(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "bench/serve_load.py", "--phase", "8x20", "--out", str(out), "--upload-names", "5"]
    cmd += ["--results-dir", str(tmp_path / "results")]  # not over the committed result
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "errors_total: 0" in done.stdout, done.stdout[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors_total"] == 0
    [run] = summary["runs"]
    [phase] = run["phases"]
    assert (phase["users"], phase["seconds"]) == (8, 20)
    assert set(phase["routes"]) == ROUTES  # every route of the mix was exercised, and nothing else
    for route, r in phase["routes"].items():
        assert r["requests"] > 0 and r["failures"] == 0, route
        assert 0 < r["p50_ms"] <= r["p95_ms"], route
    assert phase["failures"] == []
    rss = phase["rss_mb"]
    assert rss["samples"] >= 10  # one a second over 20 s
    assert 0 < rss["start"] <= rss["peak"] and 0 < rss["end"] <= rss["peak"]
    # every upload was indexed; at most 5 names (plus the warm-up's seed) however many uploads there were
    jobs = run["upload_jobs"]
    assert jobs["jobs"] == phase["routes"]["POST /v1/collections/{name}/documents"]["requests"]
    assert jobs["states"] == {"done": jobs["jobs"]} and jobs["file_errors"] == [] and jobs["errors"] == 0
    assert 2 <= jobs["documents_in_scratch_collection"] <= 6
    for name in ("phase1-locust.json", "phase1_stats_history.csv", "phase1-locust.log", "rss.csv", "server.log"):
        assert (out / name).is_file(), name
    recorded = json.loads((tmp_path / "results" / "serve_load.json").read_text())
    assert recorded["benchmark"] == "serve_load" and recorded["figures"]["runs"] == [
        {k: v for k, v in run.items() if k != "server_logs"}
    ]


def test_serve_load_refuses_a_bad_phase_in_one_line():
    done = subprocess.run(
        [sys.executable, "bench/serve_load.py", "--phase", "64"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "'64' is not USERSxSECONDS" in done.stderr and "Traceback" not in done.stderr
