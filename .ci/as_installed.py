"""Lay the repository out as the installed `switchyard` package, for tools that read packages from disk.

pyproject.toml maps the layer folders into one import package (package/ -> switchyard, graphs/ ->
switchyard.graphs, ...). import-linter and mypy walk a package's folder on disk, so they would see package/ alone:
this script builds that tree from symlinks in a temporary folder and prints the folder to put on the path.

    python .ci/as_installed.py            # prints the folder holding switchyard/
"""

from __future__ import annotations

import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lay_out(target: Path) -> Path:
    """Symlink every mapped folder's files into target/switchyard/..., as the wheel lays them out."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir: dict[str, str] = setuptools["package-dir"]
    for package in setuptools["packages"]:
        parent = max((p for p in package_dir if package == p or package.startswith(p + ".")), key=len)
        source = ROOT / package_dir[parent] / Path(*package[len(parent) :].split(".")[1:])
        dest = target / Path(*package.split("."))
        dest.mkdir(parents=True, exist_ok=True)
        for module in source.glob("*.py"):
            (dest / module.name).symlink_to(module)
    return target


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="switchyard-layout-"))
    print(lay_out(folder))
