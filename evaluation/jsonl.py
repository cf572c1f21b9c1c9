"""Append-only JSON-lines files that survive a kill: results and judgements are written one line at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path


def read_results(path: Path) -> list[dict]:
    """Every complete line; a torn last line (killed mid-write) is ignored and will be redone."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def drop_torn_tail(path: Path) -> None:
    """Cut a last line that a killed run left half-written, so appending starts on a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def drop_error_lines(path: Path) -> int:
    """Remove the lines of questions that failed, so a resumed run asks them again. Written to a temporary file
    and renamed over the original, so a kill midway loses nothing. Returns how many were removed."""
    if not path.exists():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [line for line in lines if not json.loads(line).get("error")]
    if len(keep) < len(lines):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(keep), encoding="utf-8")
        os.replace(tmp, path)
    return len(lines) - len(keep)
