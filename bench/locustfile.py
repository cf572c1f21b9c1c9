"""Locust users for the HTTP service's mixed traffic; bench/serve_load.py runs it headless against a server it starts.

    .venv/bin/locust -f bench/locustfile.py --headless -u 16 -r 4 -t 60s --host http://127.0.0.1:8000 \\
        [--pipeline no-llm] [--scratch-collection loadtest] [--upload-names 200] [--run-tag t1] [--summary-file F]

Each user loops over five tasks, drawn by weight, with 0.5-1.5 s between them:

| task | request | weight | a success |
|---|---|---|---|
| ask | `POST /v1/ask {question, pipeline}` | 3 | 200 with a string `answer` |
| search | `POST /v1/search {query, pipeline, k: 5}` | 3 | 200 with a `results` list |
| stream | `POST /v1/ask/stream {question, pipeline}` | 2 | 200, read to its `answer` event (its time: to that event) |
| list | `GET /v1/collections/{scratch}/documents` | 1 | 200 with a list |
| upload | `POST /v1/collections/{scratch}/documents`, one small markdown file | 1 | 202 with a `job_id` |

Uploads go to the scratch collection (created by the first upload; serve_load.py makes one before the load) under
`--upload-names` names at most (`load-0000.md` ...), each upload a new text (run tag and counter): the first round
adds documents, later rounds update them, so the index holds at most that many extra documents however long the run.
When Locust quits, `--summary-file` gets the run's final figures as JSON: per route its requests, failures, p50/p95,
mean, max and requests/s, the failures by route and error, and the upload job ids (for the driver to check that the
jobs finished). Locust's own `--csv` files are rewritten once a second and not again at the end, so they can miss the
last second's requests.

A polite client: a 429 or 503 with a `Retry-After` header is back-pressure, not a failure: it is reported under
the route's name plus ` [back-pressure]` (marked a success, so the route's own percentiles hold only answered
requests), and the user waits Retry-After seconds (x 1-1.25 jitter, at most 10 s) and sends the same request
again, as often as it takes: a request is answered, or still waiting when the run ends (then it is dropped, neither
a success nor a failure). Everything else that is not the success above is a Locust failure: connection errors, timeouts, 5xx,
unexpected 4xx, a 2xx with the wrong body, a stream that ends without `answer` or with `error`, and a 429/503
without `Retry-After`.

With `SWITCHYARD_BENCH_KEY` in the environment, every request carries it as `Authorization: Bearer KEY` (a server
with keys, as behind a load balancer); without it, none (an open server).

Only Locust and the standard library are imported: the file runs against any server of this API.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time

from gevent.event import Event
from locust import HttpUser, between, events, tag, task
from locust.stats import StatsError

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
QUERIES = [
    "knuckle coupler",
    "automatic coupling",
    "standard gauge",
    "broad gauge Russia",
    "break of gauge",
    "hump yard",
    "classification yard",
    "block working",
    "interlocking",
    "track worker protection",
]
TOPICS = ["couplers", "gauges", "hump yards", "signal boxes", "track safety", "freight wagons", "timetables"]
MAX_WAIT_S = 10.0  # cap on one back-off wait
TIMEOUT_S = (10, 150)  # connect, read: past the server's --timeout (120 s), which answers 504 itself
BACKPRESSURE = " [back-pressure]"

_uploads = itertools.count()  # one Locust process: gevent users share it
_job_ids: list[str] = []
_stopping = Event()  # set when the run ends: a request waiting out back-pressure is dropped, not sent


@events.test_start.add_listener
def _started(**_kwargs) -> None:
    _stopping.clear()


@events.test_stopping.add_listener
def _stop(**_kwargs) -> None:
    _stopping.set()


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    group = parser.add_argument_group("Switchyard's mixed traffic (bench/locustfile.py)")
    group.add_argument("--pipeline", default="no-llm", help="the pipeline asked and searched (default no-llm)")
    group.add_argument("--scratch-collection", default="loadtest", help="uploads go here, list reads it")
    group.add_argument("--upload-names", type=int, default=200, help="distinct uploaded file names (default 200)")
    group.add_argument("--run-tag", default="run", help="written into every uploaded text (a phase's own texts)")
    group.add_argument("--summary-file", default="", help="where to write the final figures and job ids (JSON)")


@events.quitting.add_listener
def _write_summary(environment, **_kwargs) -> None:
    """The users have stopped when `quitting` fires: the figures are final."""
    path = environment.parsed_options.summary_file if environment.parsed_options else ""
    if not path:
        return
    stats = environment.stats
    routes = {
        f"{e.method} {e.name}": {
            "requests": e.num_requests,
            "failures": e.num_failures,
            "p50_ms": e.get_response_time_percentile(0.5) or 0,
            "p95_ms": e.get_response_time_percentile(0.95) or 0,
            "mean_ms": round(e.avg_response_time, 1),
            "max_ms": round(e.max_response_time, 1),
            "rps": round(e.total_rps, 2),
        }
        for e in stats.entries.values()
        if e.num_requests or e.num_failures
    }
    failures = [
        {"route": f"{e.method} {e.name}", "error": StatsError.parse_error(e.error), "count": e.occurrences}
        for e in stats.errors.values()
    ]
    with open(path, "w") as fh:
        json.dump({"routes": routes, "failures": failures, "upload_job_ids": _job_ids}, fh, indent=1)


def _retry_after(response) -> float | None:
    try:
        value = float(response.headers["Retry-After"])
    except (KeyError, ValueError, TypeError):
        return None
    return value if value >= 0 else None


def _json(response):
    try:
        return response.json()
    except ValueError:
        return None


class ServiceUser(HttpUser):
    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        self.client.trust_env = False  # 127.0.0.1 directly, never through a proxy from the environment
        self.options = self.environment.parsed_options
        if key := os.environ.get("SWITCHYARD_BENCH_KEY"):
            self.client.headers["Authorization"] = f"Bearer {key}"

    def _send(self, method: str, path: str, name: str, check, *, stream: bool = False, **kwargs) -> None:
        """One request, sent again after each back-pressure reply; `check(response)` says what is wrong with a
        2xx (None: nothing) and may read a stream."""
        while not _stopping.is_set():
            started = time.perf_counter()
            with self.client.request(
                method, path, name=name, catch_response=True, timeout=TIMEOUT_S, stream=stream, **kwargs
            ) as response:
                status = response.status_code
                if status in (429, 503):
                    after = _retry_after(response)
                    if after is None:
                        response.failure(f"{status} without Retry-After: {response.text[:200]}")
                        return
                    response.request_meta["name"] = name + BACKPRESSURE
                    response.success()
                    wait = min(after * random.uniform(1.0, 1.25), MAX_WAIT_S)  # jitter: no herd at one instant
                else:
                    if 200 <= status < 300:
                        problem = check(response)
                    elif status == 0:
                        problem = f"no reply: {type(response.error).__name__}: {response.error}"
                    else:
                        problem = f"{status}: {response.text[:300]}"
                    if stream:  # the time to the end of the stream, not to its headers
                        response.request_meta["response_time"] = (time.perf_counter() - started) * 1000
                    if problem:
                        response.failure(problem)
                    else:
                        response.success()
                    return
            _stopping.wait(wait)  # gevent's wait under Locust: the other users go on; the end of the run cuts it short

    @task(3)
    def ask(self) -> None:
        def check(response):
            body = _json(response)
            return None if isinstance(body, dict) and isinstance(body.get("answer"), str) else "200 without an answer"

        body = {"question": random.choice(QUESTIONS), "pipeline": self.options.pipeline}
        self._send("POST", "/v1/ask", "/v1/ask", check, json=body)

    @task(3)
    def search(self) -> None:
        def check(response):
            body = _json(response)
            return None if isinstance(body, dict) and isinstance(body.get("results"), list) else "200 without results"

        body = {"query": random.choice(QUERIES), "pipeline": self.options.pipeline, "k": 5}
        self._send("POST", "/v1/search", "/v1/search", check, json=body)

    @task(2)
    def stream(self) -> None:
        def check(response):
            event = None
            for line in response.iter_lines(decode_unicode=True):
                if line.startswith("event:"):
                    event = line[len("event:") :].strip()
                    if event in ("answer", "error"):
                        break
            response.close()
            if event == "answer":
                return None
            return "the stream sent an error event" if event == "error" else f"the stream ended after {event!r}"

        body = {"question": random.choice(QUESTIONS), "pipeline": self.options.pipeline}
        self._send("POST", "/v1/ask/stream", "/v1/ask/stream", check, stream=True, json=body)

    @task(1)
    def list_documents(self) -> None:
        def check(response):
            return None if isinstance(_json(response), list) else "200 without a list"

        path = f"/v1/collections/{self.options.scratch_collection}/documents"
        self._send("GET", path, "/v1/collections/{name}/documents", check)

    @tag("upload")  # serve_load.py --no-uploads: --exclude-tags upload
    @task(1)
    def upload(self) -> None:
        n = next(_uploads)
        name = f"load-{n % self.options.upload_names:04d}.md"
        text = (
            f"# Load note {n} ({self.options.run_tag})\n\n"
            f"Note {n} of run {self.options.run_tag} is about {random.choice(TOPICS)}. "
            f"It was written by a load test and says nothing else of note; its number is {n}.\n"
        )

        def check(response):
            body = _json(response)
            if not (isinstance(body, dict) and isinstance(body.get("job_id"), str)):
                return "202 without a job_id"
            _job_ids.append(body["job_id"])
            return None

        path = f"/v1/collections/{self.options.scratch_collection}/documents"
        files = {"files": (name, text.encode(), "text/markdown")}
        self._send("POST", path, "/v1/collections/{name}/documents", check, files=files)
