"""What Switchyard costs as a library: install size and time in a fresh virtual environment, and import time/RSS.

    .venv/bin/python bench/library_footprint.py                      # import figures + core and [all] installs
    .venv/bin/python bench/library_footprint.py --extras "" local    # the installs to measure ("" = the core)
    .venv/bin/python bench/library_footprint.py --no-install         # import figures only

Installs come from the wheelhouse setup.sh built (.venv/wheelhouse), offline, into a new venv under a temporary
folder: a wheel of this checkout (no deps) plus its dependencies as the extras ask. Size = the venv's disk use
(`du`), time = the pip command's wall time (unzipping and byte-compiling; nothing is downloaded or built).
Import figures: `python -c "import switchyard"` and `from switchyard import Pipeline` in fresh interpreters
(median of --runs), wall time and peak RSS (ru_maxrss of the child). Targets: core <= 1.2 GB (no PyTorch),
`import switchyard` <= 1 s and <= 150 MB. Records the installs in bench/results/library_footprint.json and the
imports in bench/results/import_cost.json (`--no-install` / `--no-import`: one of them; docs/benchmarks.md's tables
are generated from them: python -m bench report).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import results

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"


def child_figures(code: str, runs: int) -> tuple[float, float]:
    """Median wall seconds and median peak RSS (MB) of `python -c code` in fresh interpreters."""
    seconds, rss = [], []
    probe = code + "\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=tempfile.gettempdir()
        )
        seconds.append(time.perf_counter() - start)
        rss.append(int(done.stdout.split()[-1]) / 1024)  # KiB on Linux
    return statistics.median(seconds), statistics.median(rss)


def install(extras: str, workdir: Path) -> tuple[float, float]:
    """Seconds to install switchyard[extras] from the wheelhouse into a new venv, and the venv's size in MB."""
    wheels = workdir / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, ROOT],
        check=True,
    )
    (wheel,) = wheels.glob("switchyard-*.whl")
    env_dir = workdir / f"venv-{extras or 'core'}"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    requirement = f"switchyard[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
    start = time.perf_counter()
    subprocess.run(
        [
            env_dir / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            WHEELHOUSE,
            requirement,
        ],
        check=True,
    )
    took = time.perf_counter() - start
    size = subprocess.run(["du", "-sm", env_dir], check=True, capture_output=True, text=True)
    return took, float(size.stdout.split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--extras", nargs="*", default=["", "server", "local", "all"], help='extras to install ("" = the core)'
    )
    parser.add_argument("--no-install", action="store_true", help="the import figures only")
    parser.add_argument("--no-import", action="store_true", help="the installs only")
    args = parser.parse_args()

    if not args.no_import:
        imports: dict[str, object] = {}
        for label, code in (
            ("import switchyard", "import switchyard"),
            ("from switchyard import Pipeline", "from switchyard import Pipeline"),
        ):
            seconds, rss = child_figures(code, args.runs)
            imports[label] = {"seconds": round(seconds, 3), "rss_mb": round(rss, 1)}
            print(f"{label:<36} {seconds:6.2f} s  {rss:7.1f} MB RSS (median of {args.runs})", flush=True)
        print(f"wrote {results.record('import_cost', imports, {'runs': args.runs})}")
    if not args.no_install:
        if not WHEELHOUSE.is_dir():
            sys.exit(f"error: {WHEELHOUSE} is missing: run setup.sh first")
        installs: dict[str, object] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for extras in args.extras:
                took, size = install(extras, Path(tmp))
                name = f"switchyard[{extras}]" if extras else "switchyard (core)"
                installs[name] = {"install_seconds": round(took, 1), "venv_mb": size}
                print(f"{name:<36} {took:6.1f} s  {size:7.0f} MB venv", flush=True)
        print(f"wrote {results.record('library_footprint', installs, {'extras': args.extras})}")


if __name__ == "__main__":
    main()
