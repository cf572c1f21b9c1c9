"""The development loop from a fresh clone: set-up with an empty pip cache, the full CI run, then the fast lane.

    .venv/bin/python -m bench run dev_loop              # clone HEAD, `.ci/run` in it, then the fast lane (~50 min)
    .venv/bin/python -m bench run dev_loop --no-ci      # set-up and the fast lane only (~6 min)

The clone goes beside this checkout (`.ci/run` needs ../shared there, as CI has it) and is removed afterwards
unless --keep. Records bench/results/dev_loop.json: the set-up seconds (`.ci/run` prints them; with --no-ci,
`bash setup.sh` timed here), the full suite's counts and seconds as pytest reports them, the fast lane's (README's
command, run after set-up) and CI's exit status; README.md quotes these figures.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results
from common import ROOT

FAST_LANE = [".venv/bin/python", "-m", "pytest", "-q", "-m", "not slow", "-n", "2", "--dist", "loadfile"]
SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s", re.M)


def pytest_summary(output: str) -> dict:
    """pytest's last summary line as figures: {"passed": N, "skipped": N, ..., "seconds": S}; {} if there is none."""
    found = list(SUMMARY.finditer(output))
    if not found:
        return {}
    last = found[-1]
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", last["counts"])}
    return {**counts, "seconds": round(float(last["seconds"]), 1)}


def setup_seconds(output: str) -> float | None:
    found = re.findall(r"^ci: set-up took (\d+) s$", output, re.M)
    return float(found[-1]) if found else None


def run(command: list[str], cwd: Path, env: dict, log: Path) -> tuple[int, str, float]:
    """Run `command`, its output teed into `log`; (exit status, output, wall seconds)."""
    start = time.perf_counter()
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        sink.flush()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sink.write(done.stdout)
    return done.returncode, done.stdout, time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-ci", action="store_true", help="set-up and the fast lane only, not the whole of .ci/run")
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    ap.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "dev_loop.log")
    args = ap.parse_args()
    clone = ROOT.parent / "dev-loop-clone"
    if clone.exists():
        shutil.rmtree(clone)
    args.log.write_text("")
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    with tempfile.TemporaryDirectory() as empty_cache:
        env |= {"PIP_CACHE_DIR": empty_cache, "CI": "true"}
        figures: dict = {"clone_of": sha}
        try:
            if args.no_ci:
                rc, out, seconds = run(["bash", "setup.sh"], clone, env, args.log)
                figures["setup_seconds"] = round(seconds)
            else:
                rc, out, _ = run(["bash", ".ci/run"], clone, env, args.log)
                figures["setup_seconds"] = setup_seconds(out)
                figures["full_suite"] = pytest_summary(out)
            figures["ci_rc" if not args.no_ci else "setup_rc"] = rc
            print(f"{'setup.sh' if args.no_ci else '.ci/run'}: exit {rc}; set-up {figures['setup_seconds']} s")
            if (clone / ".venv").is_dir():
                env.pop("CI")
                env["HF_HUB_OFFLINE"] = "1"
                _, out, _ = run(FAST_LANE, clone, env, args.log)
                figures["fast_lane"] = pytest_summary(out)
            print(f"full suite {figures.get('full_suite')}, fast lane {figures.get('fast_lane')} (log: {args.log})")
        finally:
            if not args.keep:
                shutil.rmtree(clone, ignore_errors=True)
    path = results.record("dev_loop", figures, {"no_ci": args.no_ci, "fast_lane": FAST_LANE})
    print(f"recorded {path.relative_to(ROOT)}")
    return 0 if figures.get("ci_rc", figures.get("setup_rc")) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
