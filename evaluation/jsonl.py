"""Append-only JSON-lines files that survive a kill: results and judgements are written one line at a time.

A results file `NAME.jsonl` may have a packed part beside it, `NAME.jsonl.xz`: the lines of a finished run,
compressed (bench/pack_run.py writes it, for runs kept in git). Readers take the packed lines first, then the
file's own; a resumed run appends to `NAME.jsonl` as ever, and packing again merges those in.
"""

from __future__ import annotations

import json
import lzma
import os
import tempfile
from pathlib import Path

PACKED_SUFFIX = ".xz"


def packed_path(path: Path) -> Path:
    """Where the packed lines of the results file `path` live."""
    return path.with_name(path.name + PACKED_SUFFIX)


def read_packed_lines(path: Path) -> list[str]:
    """The lines of the packed part of `path` (none if it has no packed part). Every one is whole: a packed file
    is written complete and renamed into place."""
    packed = packed_path(path)
    if not packed.exists():
        return []
    with lzma.open(packed, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


def write_packed_lines(path: Path, lines: list[str]) -> None:
    """Replace the packed part of `path` with `lines`, written whole to a temporary file renamed into place."""
    packed = packed_path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{packed.name}-", suffix=".tmp", dir=packed.parent)
    os.close(fd)
    try:
        with lzma.open(tmp, "wt", encoding="utf-8", preset=9 | lzma.PRESET_EXTREME) as fh:
            fh.write("".join(line + "\n" for line in lines))
        os.chmod(tmp, 0o644)
        os.replace(tmp, packed)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_log_lines(path: Path) -> list[str]:
    """The complete lines of `path` itself; a torn last line (killed mid-write) is left out and will be redone."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines.pop()
    return [line for line in lines if line.strip()]


def read_results(path: Path) -> list[dict]:
    """Every row: the packed part's, then every complete line of `path` (a torn last line is ignored)."""
    rows = [json.loads(line) for line in read_packed_lines(path)]
    for line in read_log_lines(path):
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
    """Remove the lines of questions that failed, from `path` and its packed part, so a resumed run asks them
    again. Each file is written to a temporary file and renamed over the original, so a kill midway loses nothing.
    Returns how many were removed."""
    removed = 0
    packed = read_packed_lines(path)
    keep_packed = [line for line in packed if not json.loads(line).get("error")]
    if len(keep_packed) < len(packed):
        write_packed_lines(path, keep_packed)
        removed += len(packed) - len(keep_packed)
    if not path.exists():
        return removed
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [line for line in lines if not json.loads(line).get("error")]
    if len(keep) < len(lines):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(keep), encoding="utf-8")
        os.replace(tmp, path)
    return removed + len(lines) - len(keep)
