"""Compare a replayed run's rows with the recorded ones: how many are identical apart from what depends on timing,
on where the checkout lives, or on how a reply was obtained.

    .venv/bin/python bench/replay_check.py bench/eval/abstention-phantomwiki-s3 /tmp/replay-s3
    .venv/bin/python bench/replay_check.py            # the committed fixture, replayed here: the docs' result
    .venv/bin/python bench/replay_check.py --record   # ... and recorded afresh with the real model (not committed)

Reads each folder's rows (`questions.jsonl`, packed `questions.jsonl.xz` first: evaluation/jsonl.py), keyed by
(config, run, question). Left out of the comparison: timings (`ms`, `*_ms`), run and trace ids, the cache
counters (`cached_calls`) and document source paths (a checkout's absolute path). Prints one line per config
(identical / compared) and the first differing fields; exits 1 when a row differs or is missing from the replay.

With no folders, it replays the committed recorded run (tests/fixtures/recorded_run/, tests/fixtures/record_run.py)
into a temporary folder with the command of its test (`cli.py eval ... --replay`, llama_cpp and every embedding
runtime unimportable), compares the rows with the committed ones in the fixture's own comparable form
(record_run.comparable: timings dropped, paths relative, floats rounded), and records in
bench/results/replay_check.json (bench/results.py; `--result NAME` for another name): under `replay` the rows
identical per config, LLM calls and how many were replayed, replies and vectors replayed / recorded, the command's
asking time, wall time and peak RSS; under `cache` the files and bytes of the recorded replies and vectors; under
`manifest` the time to build the run manifest with an empty file-hash cache (every model file hashed) and again
(hashes remembered), and what was hashed. `--record` also runs the recording itself, the real model writing into a
temporary reply cache and vector folder (the committed fixture is left as it is), and records it under `record`
with how many of its rows equal the committed ones.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import results as result_files
from common import load_average  # (and the repository root on sys.path)

from switchyard.evaluation.jsonl import read_packed_lines, read_results  # noqa: E402
from switchyard.evaluation.rows import RESULTS  # noqa: E402
from tests.fixtures.record_run import CONFIGS, DATASET, RECORDED, ROOT, eval_args  # noqa: E402
from tests.fixtures.record_run import comparable as fixture_comparable  # noqa: E402

IGNORED = {"ms", "run_id", "trace_id", "cached_calls", "source", "path"}
# cli.py with llama-cpp-python and every embedding runtime unimportable (as tests/evaluation/test_recorded_run.py
# runs it): a replay that tried to load the GGUF or compute a vector would fail
NO_MODEL = (
    "import runpy, sys; sys.modules.update(dict.fromkeys(['llama_cpp', 'sentence_transformers', 'openvino', "
    "'onnxruntime'])); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def comparable(value):
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in IGNORED and not k.endswith("_ms")}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def first_difference(a, b, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            if a.get(key) != b.get(key):
                return first_difference(a.get(key), b.get(key), f"{where}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{where}[{i}]")
    return f"{where or '.'}: {str(a)[:80]!r} vs {str(b)[:80]!r}"


def rows_by_key(run: Path) -> dict[tuple, dict]:
    return {(r["config"], r["run"], r["id"]): comparable(r) for r in read_results(run / RESULTS)}


def compare(recorded: dict[tuple, dict], replayed: dict[tuple, dict]) -> tuple[Counter, Counter, list[str]]:
    """Per config, the rows identical and the rows compared; the first few differences."""
    same, total = Counter(), Counter()
    differences = []
    for key, row in recorded.items():
        total[key[0]] += 1
        other = replayed.get(key)
        if other == row:
            same[key[0]] += 1
        elif len(differences) < 5:
            differences.append(f"  {key}: " + ("not replayed" if other is None else first_difference(row, other)))
    return same, total, differences


def print_comparison(same: Counter, total: Counter, differences: list[str]) -> None:
    for config in total:
        print(f"{config}: {same[config]}/{total[config]} rows identical")
    print("\n".join(differences))


# -- the committed fixture -------------------------------------------------------------------------------------
def run_eval(args: list[str], no_model: bool) -> tuple[subprocess.CompletedProcess, float]:
    """`cli.py eval ARGS` in a fresh process and its wall time; exits with its output's tail if it failed."""
    command = [sys.executable, *(["-c", NO_MODEL] if no_model else []), str(ROOT / "cli.py"), *args]
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
        sys.exit(1)
    return done, time.perf_counter() - t0


def eval_figures(done: subprocess.CompletedProcess, wall_s: float, out: Path) -> dict:
    """What one `cli.py eval` run printed and wrote: asking time, replies and vectors replayed / recorded, and per
    config its rows and LLM calls (with how many came from the reply cache)."""

    def counts(what: str) -> dict | None:
        found = re.search(rf"{what}: (\d+) replayed from and (\d+) recorded", done.stdout)
        return {"replayed": int(found[1]), "recorded": int(found[2])} if found else None

    asked = re.search(r"asked (\d+) question\(s\) in ([\d.]+) s", done.stdout)
    rows = read_results(out / RESULTS)
    configs: dict[str, dict] = {}
    for row in rows:
        c = configs.setdefault(row["config"], {"rows": 0, "llm_calls": 0, "cached_calls": 0, "calls": []})
        c["rows"] += 1
        c["llm_calls"] += row["llm_calls"]
        c["cached_calls"] += row.get("cached_calls", 0)
        c["calls"].append(row["llm_calls"])
    for c in configs.values():
        calls = c.pop("calls")
        c["calls_min"], c["calls_max"] = min(calls), max(calls)
    return {
        "questions": len({row["id"] for row in rows}),
        "rows": len(rows),
        "configs": configs,
        "asked": int(asked[1]) if asked else 0,
        "asking_s": float(asked[2]) if asked else None,
        "wall_s": round(wall_s, 1),
        "replies": counts("LLM replies"),
        "vectors": counts("embedding vectors"),
    }


def fixture_rows(path: Path) -> dict[tuple, dict]:
    """Rows in the fixture's comparable form (record_run.comparable), keyed by (config, run, question)."""
    rows = read_results(path)
    return {(r["config"], r["run"], r["id"]): fixture_comparable(r) for r in rows}


def folder_size(folder: Path) -> dict:
    files = [f for f in folder.rglob("*") if f.is_file()]
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files)}


def manifest_cost(tmp: Path) -> dict:
    """Time to build the fixture's run manifest with an empty file-hash cache (every model file hashed), then again
    (the hashes remembered by path, size and mtime)."""
    from switchyard.configs.loader import load_config
    from switchyard.evaluation import manifest as run_manifest

    run_manifest._hash_cache_file = lambda: tmp / "file-sha256.json"  # not the user's cache: hashed the first time
    configs = {path.stem: load_config(path, ["embedding.backend=torch"]) for path in CONFIGS}
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        built = run_manifest.build(configs, DATASET, 1, None, tmp / "out")
        times.append(time.perf_counter() - t0)
    hashed = [Path(m["path"]) for m in built["models"] if m["sha256"]]
    return {
        "first_s": round(times[0], 3),
        "second_s": round(times[1], 3),
        "hashed_files": len(hashed),
        "hashed_mb": round(sum(p.stat().st_size for p in hashed) / 1e6, 1),
    }


def check_fixture(args: argparse.Namespace) -> int:
    load_start = load_average()
    recorded = fixture_rows(RECORDED / "results.jsonl")
    figures: dict = {"fixture": str(RECORDED.relative_to(ROOT))}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        done, wall = run_eval(eval_args(tmp / "replay", "--replay"), no_model=True)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the replay: the only child so far
        same, total, differences = compare(recorded, fixture_rows(tmp / "replay" / RESULTS))
        print("replay of the committed fixture, no model importable:")
        print_comparison(same, total, differences)
        replay = eval_figures(done, wall, tmp / "replay")
        for name, c in replay["configs"].items():
            c["identical"], c["compared"] = same[name], total[name]
        figures["replay"] = {
            **replay,
            "identical": sum(same.values()),
            "compared": len(recorded),
            "peak_rss_mb": round(peak_kib / 1024),
        }
        print(
            f"replay: {replay['asking_s']} s asking, {wall:.1f} s wall, peak RSS {peak_kib / 1024:.0f} MB; "
            f"replies {replay['replies']}, vectors {replay['vectors']}"
        )
        figures["cache"] = {
            "replies": {
                **folder_size(RECORDED / "llm-cache"),
                "entries": len(read_packed_lines(RECORDED / "llm-cache" / "replies.jsonl")),
            },
            "vectors": folder_size(RECORDED / "vectors"),
            "fixture": folder_size(RECORDED),
        }
        print(f"fixture: {figures['cache']}")
        figures["manifest"] = manifest_cost(tmp)
        print(f"manifest: {figures['manifest']}")
        if args.record:
            record_args = eval_args(tmp / "record")
            record_args[record_args.index("--llm-cache") + 1] = str(tmp / "llm-cache")
            record_args[record_args.index("--vector-cache") + 1] = str(tmp / "vectors")
            done, wall = run_eval(record_args, no_model=False)
            like, _, record_differences = compare(recorded, fixture_rows(tmp / "record" / RESULTS))
            print("recorded afresh with the real model, against the committed rows:")
            print_comparison(like, total, record_differences)
            figures["record"] = {
                **eval_figures(done, wall, tmp / "record"),
                "like_committed": sum(like.values()),
                "compared": len(recorded),
                "cache": {"replies": folder_size(tmp / "llm-cache"), "vectors": folder_size(tmp / "vectors")},
            }
            print(f"record: {figures['record']['asking_s']} s asking, {wall:.1f} s wall")
    figures["load_average"] = {"start": load_start, "end": load_average()}
    command = [arg.replace(f"{ROOT}/", "") for arg in eval_args(Path("OUT"), "--replay")]  # no checkout path
    config = {"fixture": figures["fixture"], "eval": command, "record": args.record}
    print(f"recorded {result_files.record(args.result, figures, config)}")
    return 0 if figures["replay"]["identical"] == len(recorded) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recorded", type=Path, nargs="?", help="a recorded run folder (none: the committed fixture)")
    parser.add_argument("replayed", type=Path, nargs="?", help="its replay's folder")
    parser.add_argument("--record", action="store_true", help="fixture: also record it afresh (real model, ~3 min)")
    parser.add_argument("--result", default="replay_check", help="fixture: the result file bench/results/NAME.json")
    args = parser.parse_args(argv)
    if args.recorded is None:
        return check_fixture(args)
    if args.replayed is None or args.record:
        parser.error("give both folders (RECORDED REPLAYED), or none for the fixture; --record only for the fixture")
    recorded, replayed = rows_by_key(args.recorded), rows_by_key(args.replayed)
    if not recorded:
        print(f"replay_check: {args.recorded} holds no rows", file=sys.stderr)
        return 1
    same, total, differences = compare(recorded, replayed)
    print_comparison(same, total, differences)
    return 0 if sum(same.values()) == len(recorded) else 1


if __name__ == "__main__":
    sys.exit(main())
