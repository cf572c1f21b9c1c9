"""Ingestion chunks/s locally and on a Ray cluster with 1 and 2 actors, side by side on the same corpus, with the
peak memory of the driver and of the actors.

    .venv/bin/python bench/ray_ingest.py                      # 300 SciFact abstracts, 2 rounds, local / ray-1 / ray-2
    .venv/bin/python bench/ray_ingest.py --docs 1000 --rounds 1 --files 16

Options: [--docs 300] [--files 8] [--rounds 2] [--cpus 2] [--set KEY=VALUE ...] [--out bench/out/ray-ingest].
Starts its own local cluster on 127.0.0.1 (tests/ray_cluster.py: one head node with --cpus CPUs, stopped by process
id at the end). The corpus (SciFact abstracts split over --files JSONL files) is written once; every round then runs
`cli.py ingest` into a fresh index once per setup, interleaved (a load change on a shared machine hits all alike):
- local: the ordinary ingest (embedding threads: one per core);
- ray-1: `--ray`, one actor reserving all --cpus CPUs (its embedding threads: as many);
- ray-2: `--ray`, two actors of --cpus / 2 CPUs each.
chunks/s is chunks written over the ingest's own time (the summary line: reading to FTS index, model loading
included, Ray's start of the pipeline and its actors included); "wall s" is the whole command (Python start, connect).
Peak RSS is sampled every 0.1 s: the driver (the `cli.py` process) and each embedding actor (the largest, and all
of them together). The best round per setup counts. Prints a Markdown table and, last, `ray2_vs_local: <ratio>`.
Writes every round to --out/results.json and the figures to bench/results/ray_ingest.json (the docs' table).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import results as result_files
from common import ROOT, load_average, rss_mb, scifact_docs

sys.path.insert(0, str(ROOT))
from tests.ray_cluster import LocalCluster  # noqa: E402


def run_ingest(corpus: Path, index: Path, extra: list[str], cluster: LocalCluster | None) -> dict:
    cmd = [
        sys.executable,
        str(ROOT / "cli.py"),
        "ingest",
        str(corpus),
        "--index-dir",
        str(index),
        "--no-progress",
        *extra,
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    peaks: dict[int, float] = {}
    driver_peak = [0.0]

    def sample():
        while proc.poll() is None:
            driver_peak[0] = max(driver_peak[0], rss_mb(proc.pid) or 0.0)
            for pid in cluster.actor_pids() if cluster else []:
                peaks[pid] = max(peaks.get(pid, 0.0), rss_mb(pid) or 0.0)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"ingest failed ({' '.join(cmd)}):\n{err[-3000:]}")
    line = out.strip().splitlines()[-1]
    chunks = int(re.search(r"(\d+) chunks written", line).group(1))
    seconds = float(re.search(r" in ([\d.]+)s;", line).group(1))
    return {
        "chunks": chunks,
        "seconds": seconds,
        "chunks_per_s": chunks / seconds,
        "wall_s": wall,
        "driver_peak_mb": driver_peak[0],
        "actor_peak_mb": max(peaks.values(), default=0.0),
        "actors_peak_sum_mb": sum(peaks.values()),
        "actors_seen": len(peaks),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "ray-ingest"))
    parser.add_argument("--result", default="ray_ingest", help="the result file: bench/results/NAME.json")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = [x for o in args.overrides for x in ("--set", o)]
    setups = {
        "local": sets,
        "ray-1": [*sets, "--set", "ray.actors=1", "--set", f"ray.cpus_per_actor={args.cpus}"],
        "ray-2": [*sets, "--set", "ray.actors=2", "--set", f"ray.cpus_per_actor={args.cpus / 2:g}"],
    }
    results: dict[str, list[dict]] = {name: [] for name in setups}
    load_start = load_average()
    print(f"load average {load_start[0]:.2f} / {load_start[1]:.2f} on {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(head_cpus=args.cpus, worker_cpus=0) as cluster:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        docs = scifact_docs(args.docs)
        for i in range(args.files):
            part = docs[i :: args.files]
            (corpus / f"part-{i:02d}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in part))
        for rnd in range(args.rounds):
            for name, extra in setups.items():
                index = Path(tmp) / f"index-{name}-{rnd}"
                use = cluster if name != "local" else None
                r = run_ingest(corpus, index, [*extra, *(["--ray", cluster.address] if use else [])], use)
                results[name].append(r)
                print(
                    f"round {rnd + 1} {name}: {r['chunks']} chunks in {r['seconds']:.1f} s = "
                    f"{r['chunks_per_s']:.1f} chunks/s (wall {r['wall_s']:.1f} s); driver peak "
                    f"{r['driver_peak_mb']:.0f} MB, actors {r['actors_seen']} peak {r['actor_peak_mb']:.0f} MB",
                    flush=True,
                )
    best = {name: max(rs, key=lambda r: r["chunks_per_s"]) for name, rs in results.items()}
    local = best["local"]["chunks_per_s"]
    print(
        f"\n{args.docs} SciFact abstracts in {args.files} files, {best['local']['chunks']} chunks, "
        f"{args.cpus} CPUs, best of {args.rounds} round(s)\n"
    )
    print("| setup | chunks/s (rounds) | vs local | wall s | driver peak MB | actor peak MB (all actors) |")
    print("|---|---|---|---|---|---|")
    for name, r in best.items():
        rounds = " / ".join(f"{x['chunks_per_s']:.1f}" for x in results[name])
        actors = f"{r['actor_peak_mb']:.0f} ({r['actors_peak_sum_mb']:.0f})" if r["actors_seen"] else "-"
        print(
            f"| {name} | **{r['chunks_per_s']:.1f}** ({rounds}) | {r['chunks_per_s'] / local:.2f}x | "
            f"{r['wall_s']:.1f} | {r['driver_peak_mb']:.0f} | {actors} |"
        )
    (out / "results.json").write_text(json.dumps({"args": vars(args), "rounds": results}, indent=2))
    print(f"\nray2_vs_local: {best['ray-2']['chunks_per_s'] / local:.2f}")
    figures = {
        "docs": args.docs,
        "files": args.files,
        "cpus": args.cpus,
        "chunks": best["local"]["chunks"],
        "load_average": {"start": load_start, "end": load_average()},
        "setups": {
            name: {
                "rounds_chunks_per_s": [round(x["chunks_per_s"], 2) for x in results[name]],
                **{k: round(r[k], 1) for k in ("chunks_per_s", "wall_s", "driver_peak_mb", "actor_peak_mb")},
                "actors_seen": r["actors_seen"],
            }
            for name, r in best.items()
        },
    }
    config = {k: v for k, v in vars(args).items() if k not in ("out", "result")}
    print(f"recorded {result_files.record(args.result, figures, config)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
