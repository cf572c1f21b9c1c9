"""Helpers shared by the benchmark scripts under bench/ (not part of the library).

Importing this module puts the repository root on sys.path (so `configs`, `retrievers`, `nodes`, ... import) and
applies configs.runtime_env (offline, quiet); it loads no model. A script directly in bench/ imports it as
`from common import ...` (its own folder is on sys.path); a script in a subfolder (bench/calibration/,
bench/research/) first puts bench/ on sys.path:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Datasets are read from the checkout's sibling folder `../shared/datasets` (SHARED); nothing here names an
absolute path. The suite's cached BM25 / dense runs (bench/out/retrieval-suite/runs/) are written and read by
bench/fusion_tuning.py, which the retrieval benchmarks import for them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"
sys.path.insert(0, str(ROOT))
from switchyard.configs import runtime_env  # noqa: E402

runtime_env.apply()

HOTPOTQA = Path(os.environ.get("HOTPOT_DIR", SHARED / "hotpotqa_dev_distractor_sample"))
PHANTOMWIKI = SHARED / "phantomwiki-s11"

# Questions about the bundled sample corpus (samples/corpus), asked by ask_latency.py and agent_sample.py.
SAMPLE_QUESTIONS = [
    "What protects workers on a track?",
    "Who patented the knuckle coupler?",
    "What is standard gauge?",
    "How are freight cars sorted in a hump yard?",
    "What does an interlocking prevent?",
    "Which yard is the largest classification yard?",
    "What is a break of gauge?",
    "How fast may cars be humped?",
]


def load_average() -> list[float]:
    """The machine's 1- and 5-minute load averages, rounded: what a result records at its start and end, so that a
    reader can tell a quiet run from a loaded one (tables._load_average writes them under a table)."""
    return [round(x, 2) for x in os.getloadavg()[:2]]


def repo_path(path: Path) -> str:
    """`path` relative to the repository root (../shared/... included), so that a recorded config does not depend on
    where the checkout lives."""
    return os.path.relpath(Path(path).resolve(), ROOT)


# -- SciFact ------------------------------------------------------------------------------------------------------
def scifact_docs(limit: int | None = None) -> list[dict]:
    path = SHARED / "scifact" / "corpus.jsonl"
    if not path.is_file():
        sys.exit(f"benchmark data not found: {path} (the benchmarks read ../shared/datasets)")
    docs = []
    with path.open() as fh:
        for line in fh:
            docs.append(json.loads(line))
            if limit and len(docs) >= limit:
                break
    return docs


def scifact_queries(limit: int | None = None) -> list[str]:
    with (SHARED / "scifact" / "queries.jsonl").open() as fh:
        queries = [json.loads(line)["text"] for line in fh]
    return queries[:limit] if limit else queries


# -- HotpotQA dev distractor sample (the calibration and near-miss sets) -------------------------------------------
HOTPOT_SPLITS = {"a": "dev300_a.jsonl", "b": "dev500.jsonl"}  # a = tuning, b = held-out report split


def load_split(name: str) -> list[dict]:
    """HotpotQA records of split `a` (dev300_a) or `b` (dev500)."""
    with open(HOTPOTQA / HOTPOT_SPLITS[name]) as f:
        return [json.loads(line) for line in f]


def paragraphs(records: list[dict]) -> dict[str, str]:
    """title -> paragraph text (first occurrence wins; 2 titles in the union have slightly different texts)."""
    out: dict[str, str] = {}
    for r in records:
        for title, sents in zip(r["context"]["title"], r["context"]["sentences"]):
            out.setdefault(title, "".join(sents).strip())
    return out


def gold_titles(r: dict) -> set[str]:
    return set(r["supporting_facts"]["title"])


# -- grade / citation-support calibration (bench/calibration/) ----------------------------------------------------
# Everything heavy is cached here: the HotpotQA and PhantomWiki indexes, the top-5 retrieval results with their
# question-passage cosines, and the sentence vectors for the support calibration.
CALIBRATION_CACHE = Path(os.environ.get("CALIB_CACHE", "/tmp/calib"))
OLD = {"relevant": 0.3, "incorrect": 0.3, "correct": 0.5, "support": 0.55}
# what the calibration recommended as the shipped default (see calibration/README.md: the pure HotpotQA optimum
# does not transfer); 06_refusals.py later moved `incorrect` to 0.40 with word coverage 0.5 (configs/fixed.yaml)
RECOMMENDED = {"relevant": 0.35, "incorrect": 0.35, "correct": 0.55, "support": 0.55}


def torch_threads(n: int = 1) -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("CALIB_THREADS", n)))


def make_stack(index_name: str, embedder=None):
    """A RetrievalStack over collection `index_name` in the calibration cache, default config otherwise."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack

    cfg = load_config(None, [f"store.uri={CALIBRATION_CACHE / 'index'}", f"store.collection={index_name}"])
    return RetrievalStack(cfg, embedder=embedder)


def e5_overrides() -> list[str]:
    """`--set` overrides that turn on the e5 retriever as configs/e5.yaml does (its fusion settings included), for
    benchmarks that add e5 to another config."""
    from switchyard.configs.loader import load_config

    fusion = load_config("e5").retrieve.fusion
    return [
        "retrieve.retrievers.e5.enabled=true",
        f"retrieve.fusion.normalization={fusion.normalization}",
        *[f"retrieve.fusion.weights.{name}={weight}" for name, weight in fusion.weights.items()],
    ]


# -- output -------------------------------------------------------------------------------------------------------
def write_resolved_config(config, out_dir: Path) -> Path:
    """Every benchmark run records the fully resolved config beside its output."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "config.resolved.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    return path


def rss_mb(pid: int | None = None) -> float | None:
    """Resident set size of a process (default: this one) in MB, through psutil; None once it has exited."""
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


def peak_rss_mb(pid: int | None = None) -> float | None:
    """The highest resident set size a process (default: this one) has had, in MB: Linux's VmHWM, which psutil
    does not expose. Not ru_maxrss, which Linux carries over exec, so a probe would report its parent's peak."""
    try:
        status = Path(f"/proc/{pid or 'self'}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), None)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of one process (not its children), through psutil; None once it has exited."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a server a benchmark starts."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(server, url: str, timeout_s: float, every_s: float = 0.2) -> str | None:
    """Polls `url`/healthz (no proxy) until it answers 200 while `server` (a subprocess.Popen) runs. None once it
    does; else why not: "exited with code N" or "did not answer /healthz within N s"."""
    import time
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return f"exited with code {server.returncode}"
        try:
            with opener.open(f"{url}/healthz", timeout=2) as reply:
                if reply.status == 200:
                    return None
        except OSError:
            pass
        time.sleep(every_s)
    return f"did not answer /healthz within {timeout_s:g} s"


def copied_chunk(src: dict, doc_id: str, text: str, tag: str):
    """A chunk of a synthetic corpus grown from the SciFact chunk `src` (bench/query_latency.py, bench/scale.py):
    the copy `doc_id` holding `text`, its hashes set to `tag`."""
    from switchyard.retrievers.documents import Chunk

    return Chunk(
        chunk_id=f"{doc_id}::{src['chunk_index']}",
        doc_id=doc_id,
        source=src["source"],
        title=src["title"],
        text=text,
        chunk_index=src["chunk_index"],
        start_char=0,
        end_char=len(text),
        page=None,
        page_end=None,
        content_hash=tag,
        doc_hash=tag,
    )
