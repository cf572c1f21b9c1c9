"""Every source package of the repository is listed in pyproject, so the wheel holds it."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _listed_folders() -> set[Path]:
    package_dir: dict[str, str] = SETUPTOOLS["package-dir"]
    folders = set()
    for package in SETUPTOOLS["packages"]:
        parent = max((p for p in package_dir if package == p or package.startswith(p + ".")), key=len)
        folders.add(ROOT / package_dir[parent] / Path(*package[len(parent) :].split(".")[1:]))
    return folders


def test_every_source_package_is_listed():
    listed = _listed_folders()
    mapped = {ROOT / folder for folder in SETUPTOOLS["package-dir"].values()}
    found = {init.parent for top in mapped for init in top.rglob("__init__.py")}
    missing = sorted(str(f.relative_to(ROOT)) for f in found - listed)
    assert not missing, f"source packages missing from pyproject's [tool.setuptools] packages: {missing}"
    assert all(f.is_dir() for f in listed)
