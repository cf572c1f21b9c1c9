"""Throughput of `cli.py eval --workers N` against a remote-like model: questions/s with 1, 4 and 8 workers.

    .venv/bin/python bench/eval_workers.py
    .venv/bin/python bench/eval_workers.py [--workers 1 4 8] [--limit 40] [--delay-ms 300] [--dataset FILE]
                                           [--config configs/fixed.yaml] [--out bench/out/eval_workers]

The LLM is bench/slow_openai_server.py (every call waits --delay-ms, then replies validly), started here on a free
127.0.0.1 port, so the figures show how well the evaluation overlaps LLM calls, not how fast a model is. The corpus
is ingested once by a warm-up run (--limit 1) into a shared --index-dir; each timed run then gets a fresh --out
folder. Two times per run: the whole command's wall clock (process start, model loading and the unchanged-corpus
check included), and the time spent asking the questions as `cli.py eval` reports it ("asked N question(s) in X
s"); the speed-up is taken on the latter. The answers must not depend on the worker count: (id, prediction,
abstained, llm_calls) are compared across runs.

Prints the eval command, a Markdown table (workers, wall s, answering s, questions/s, speed-ups, rows, errors),
`identical_to_sequential: true|false` and `speedup_4` / `speedup_8`. Writes one `cli.py eval` folder per run
under --out (warmup/, w1/, w4/, w8/) and the collections under --index-dir (default OUT/index). Records the
figures in bench/results/eval_workers.json (docs/benchmarks.md's table is generated from it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import results as result_files
from common import ROOT, SHARED, free_port, wait_until_healthy

HOTPOT = SHARED / "hotpotqa_dev_distractor_sample"
MODEL = "slow-model"


def default_dataset() -> Path:
    """The largest JSON/JSONL sample in the HotpotQA folder (dev500.jsonl, the one bench/eval/hotpotqa-dev100 used)."""
    files = [p for p in HOTPOT.glob("*.json*") if p.suffix in (".json", ".jsonl")] if HOTPOT.is_dir() else []
    if not files:
        sys.exit(f"no HotpotQA JSON/JSONL file in {HOTPOT}; pass --dataset FILE")
    return max(files, key=lambda p: p.stat().st_size)


def start_server(port: int, delay_ms: float) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "slow_openai_server.py"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--delay-ms",
            str(delay_ms),
            "--model-name",
            MODEL,
        ]
    )
    problem = wait_until_healthy(server, f"http://127.0.0.1:{port}", timeout_s=30)
    if problem is None:
        return server
    stop(server)
    sys.exit(f"slow_openai_server.py {problem}")


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def eval_command(args, port: int, limit: int, out: Path, workers: int | str | None) -> list[str]:
    cmd = [sys.executable, "cli.py", "eval", str(args.dataset), "--configs", args.config, "--limit", str(limit)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    return cmd + [
        "--out",
        str(out),
        "--index-dir",
        str(args.index_dir),
        "--no-progress",
        "--set",
        "llm.backend=openai",
        "--set",
        f"llm.base_url=http://127.0.0.1:{port}/v1",
        "--set",
        f"llm.model={MODEL}",
        "--set",
        "llm.max_retries=0",
    ]


def run_eval(cmd: list[str], out: Path) -> tuple[float, float]:
    """Run one evaluation into a fresh `out` (eval resumes from old results): (wall seconds of the command, seconds
    spent asking questions as `cli.py eval` reports them). The corpus built from the dataset lives beside the
    shared --index-dir, so every run reuses the warm-up's collection."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": "x"}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    out.with_suffix(".log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SystemExit(f"eval failed (exit {done.returncode}): {' '.join(cmd)}\n{tail}")
    asked = re.search(r"^asked \d+ question\(s\) in ([\d.]+) s", done.stdout, re.M)
    return seconds, float(asked.group(1)) if asked else float("nan")


def read_rows(out: Path) -> list[dict]:
    with (out / "questions.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset",
        type=Path,
        help=f"HotpotQA JSON/JSONL (default: the largest file in {HOTPOT.relative_to(ROOT.parent)})",
    )
    parser.add_argument("--config", default="configs/fixed.yaml")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--delay-ms", type=float, default=300)
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "out" / "eval_workers",
        help="run folders go here (each emptied before its run)",
    )
    parser.add_argument("--index-dir", type=Path, help="eval collections, kept between runs (default: OUT/index)")
    parser.add_argument("--result", default="eval_workers", help="the result file: bench/results/NAME.json")
    args = parser.parse_args()
    args.dataset = (args.dataset or default_dataset()).resolve()
    args.out = args.out.resolve()
    args.index_dir = (args.index_dir or args.out / "index").resolve()

    port = free_port()
    server = start_server(port, args.delay_ms)
    results = {}  # workers -> (seconds, rows)
    try:
        print(
            f"dataset: {args.dataset}; config: {args.config}; {args.limit} questions; "
            f"LLM delay {args.delay_ms:g} ms per call"
        )
        warm = time.perf_counter()
        run_eval(eval_command(args, port, 1, args.out / "warmup", None), args.out / "warmup")
        print(
            f"warm-up run (--limit 1; ingests the corpus into {args.index_dir} if not there yet): "
            f"{time.perf_counter() - warm:.1f} s"
        )
        print("command:", " ".join(eval_command(args, port, args.limit, args.out / "wN", "N")))
        for workers in args.workers:
            out = args.out / f"w{workers}"
            seconds, answering = run_eval(eval_command(args, port, args.limit, out, workers), out)
            results[workers] = (seconds, answering, read_rows(out))
    finally:
        stop(server)

    base_workers = 1 if 1 in results else args.workers[0]
    base_wall, base_answering, _ = results[base_workers]
    print(
        f"\n| workers | command wall s | answering s | questions/s (answering) | speed-up vs {base_workers} "
        "(answering) | speed-up (command wall) | rows | errors |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for workers, (seconds, answering, rows) in results.items():
        errors = sum(1 for r in rows if r.get("error"))
        print(
            f"| {workers} | {seconds:.1f} | {answering:.1f} | {len(rows) / answering:.2f} | "
            f"{base_answering / answering:.2f} | {base_wall / seconds:.2f} | {len(rows)} | {errors} |"
        )
        if len(rows) != args.limit:
            print(f"  warning: {len(rows)} rows, expected {args.limit}")

    def answers(rows: list[dict]) -> set:
        return {(r["id"], r["prediction"], r["abstained"], r["llm_calls"]) for r in rows}

    reference = answers(results[base_workers][2])
    identical = all(answers(rows) == reference for _, _, rows in results.values())
    print(f"\nidentical_to_sequential: {str(identical).lower()}")
    for workers, (_, _, rows) in results.items():
        differing = sorted({a[0] for a in answers(rows) ^ reference})
        if differing:
            print(f"  {workers} workers differ on {len(differing)} questions, e.g. {differing[:3]}")
    for n in (4, 8):
        print(f"speedup_{n}: {base_answering / results[n][1]:.2f}" if n in results else f"speedup_{n}: n/a")
    figures = {
        "identical_to_sequential": identical,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "workers": {
            str(workers): {
                "wall_s": round(seconds, 1),
                "answering_s": round(answering, 1),
                "rows": len(rows),
                "errors": sum(1 for r in rows if r.get("error")),
            }
            for workers, (seconds, answering, rows) in results.items()
        },
    }
    config = {k: str(v) for k, v in vars(args).items() if k not in ("out", "index_dir", "result")}
    print(f"recorded {result_files.record(args.result, figures, config)}")


if __name__ == "__main__":
    main()
