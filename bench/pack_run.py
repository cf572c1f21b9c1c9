"""Pack recorded runs in place: each run's LLM replies into one file, its vectors into one file per model, its rows
into one compressed file.

    .venv/bin/python bench/pack_run.py bench/eval/fixed-hotpotqa100 [DIR ...] [--replies-only]

A run folder (`eval --out DIR --llm-cache DIR/llm-cache --vector-cache DIR/vectors`) holds its reply cache as
written by older runs (one JSON file per reply, `llm-cache/ab/abcd....json`) and/or by a live run (the append log
`llm-cache/replies.jsonl`), and its vectors as append logs (`vectors/<model>-<time>-<random>.vlog`; older runs:
`.npz` segments). Packing writes
`llm-cache/replies.jsonl.xz` (every reply, one compact JSON line each, sorted by key; a packed file already there is
merged in) and `vectors/<model>.npz` (every vector of that model, sorted by key), reads every entry back from the
packed file with the readers a replay uses and compares it with what the old files held (replies: equal JSON;
vectors: equal bits), and only then deletes the old files. The rows (`questions.jsonl`) go into
`questions.jsonl.xz` (evaluation/jsonl.py: the lines as written, packed ones first; checked to read back as the same
text) and the uncompressed file is deleted. `--replies-only` leaves the vectors and rows as they are. A vector folder
that extends others (`vectors/bases.txt`: runs over one corpus sharing its vectors) keeps only what they lack. Packing
a packed run again changes nothing. Replay reads either layout: `eval --replay --llm-cache DIR/llm-cache
--vector-cache DIR/vectors` (docs/evaluation.md).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
import tempfile
from pathlib import Path

from switchyard.errors import SwitchyardError
from switchyard.evaluation.jsonl import packed_path, read_log_lines, read_packed_lines, write_packed_lines
from switchyard.evaluation.rows import RESULTS
from switchyard.llm.cache import LOG, PACKED, ReplyStore, entry_line
from switchyard.retrievers.vector_recording import BASES, VectorRecording, recorded_models, write_packed_vectors


class PackError(Exception):
    pass


def pack_replies(cache: Path) -> tuple[int, int]:
    """(replies packed, old files deleted) for the reply cache folder `cache`."""
    files = sorted(cache.glob("??/*.json"))
    log = cache / LOG
    if not files and not log.exists():
        return 0, 0  # packed already (or empty)
    store = ReplyStore(cache)
    expected: dict[str, dict] = {}
    for path in files:  # the old layout, read as `ReplyStore` reads it (a broken file stops the packing)
        entry = store._get_file(path.stem)
        if entry is None or entry.get("key") != path.stem:
            raise PackError(f"{path}: its key is {entry and entry.get('key')!r}, not its name")
        expected[path.stem] = entry
    expected.update(store._read_packed())  # what a replay finds first: the packed file, then the log
    logged: dict[str, dict] = {}
    had_log = log.exists()
    if had_log:
        reader = ReplyStore(cache)
        reader._entries = logged
        reader._read_log()
    expected.update(logged)
    text = "".join(entry_line(expected[key]) + "\n" for key in sorted(expected))
    fd, tmp = tempfile.mkstemp(prefix=".replies-", suffix=".tmp", dir=cache)
    os.close(fd)
    try:
        with lzma.open(tmp, "wt", encoding="utf-8", preset=9) as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, cache / PACKED)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    reread = ReplyStore(cache)._read_packed()
    if reread.keys() != expected.keys():
        raise PackError(f"{cache / PACKED}: {len(reread)} entries read back, {len(expected)} expected")
    for key, entry in expected.items():
        if reread[key] != entry or json.loads(entry_line(entry)) != entry:
            raise PackError(f"{cache / PACKED}: entry {key} does not read back identical")
    for path in files:
        path.unlink()
    for folder in {p.parent for p in files}:
        if not any(folder.iterdir()):
            folder.rmdir()
    if log.exists():
        log.unlink()
    (cache / ".replies.lock").unlink(missing_ok=True)  # the log's writers' lock: a packed run has no writers
    return len(expected), len(files) + had_log


def pack_vectors(vectors: Path) -> tuple[int, int]:
    """(vectors packed, segment files deleted) for the vector recording folder `vectors`."""
    packed = deleted = 0
    for model in recorded_models(vectors):
        recording = VectorRecording(vectors, model, replay=True)
        segments = recording.segments()
        extends = (vectors / BASES).is_file()  # repacked without what its bases hold
        if not segments and not extends:
            continue
        runtime, expected = recording.entries(bases=False)
        assert runtime is not None
        if expected:
            write_packed_vectors(recording.packed_path, {"model": model, **runtime}, expected)
        else:
            recording.packed_path.unlink(missing_ok=True)
        segments = [s for s in segments if s != recording.packed_path]
        hidden = [s.rename(s.with_name(f".{s.name}.packing")) for s in segments]  # read the packed file alone
        try:
            reread_runtime, reread = VectorRecording(vectors, model, replay=True).entries(bases=False)
            if (
                reread_runtime != runtime
                or reread.keys() != expected.keys()
                or not all(reread[k].tobytes() == expected[k].tobytes() for k in expected)
            ):
                raise PackError(f"{recording.packed_path}: its vectors do not read back identical")
        except BaseException:
            for s, h in zip(segments, hidden):
                h.rename(s)
            raise
        for h in hidden:
            h.unlink()
        packed += len(expected)
        deleted += len(segments)
    return packed, deleted


def pack_rows(results: Path) -> tuple[int, bool]:
    """(rows packed, whether the uncompressed file was deleted) for the results file `results`."""
    if not results.exists():
        return len(read_packed_lines(results)), False  # packed already (or no rows)
    if results.read_bytes() and not results.read_bytes().endswith(b"\n"):
        raise PackError(f"{results}: its last line is torn (a killed run); resume the run or cut the line first")
    lines = read_packed_lines(results) + read_log_lines(results)
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            raise PackError(f"{results}: line {number} is not JSON ({exc.msg})") from None
    write_packed_lines(results, lines)
    if read_packed_lines(results) != lines:
        raise PackError(f"{packed_path(results)}: its lines do not read back identical")
    results.unlink()
    return len(lines), True


def pack_run(run: Path, replies_only: bool = False) -> str:
    if not run.is_dir():
        raise PackError(f"{run}: no such run folder")
    said = []
    if (run / "llm-cache").is_dir():
        n, gone = pack_replies(run / "llm-cache")
        said.append(f"{n} replies in llm-cache/{PACKED} ({gone} old files deleted)")
    if not replies_only and (run / "vectors").is_dir():
        n, gone = pack_vectors(run / "vectors")
        said.append(f"{n} vectors in vectors/<model>.npz ({gone} segments deleted)")
    if not replies_only and (packed_path(run / RESULTS).exists() or (run / RESULTS).exists()):
        n, unpacked = pack_rows(run / RESULTS)
        said.append(f"{n} rows in {packed_path(run / RESULTS).name}" + (f" ({RESULTS} deleted)" if unpacked else ""))
    return f"{run}: " + ("; ".join(said) or "nothing to pack")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="DIR")
    parser.add_argument("--replies-only", action="store_true", help="pack the reply cache, leave the vectors and rows")
    args = parser.parse_args(argv)
    for run in args.runs:
        try:
            print(pack_run(run, args.replies_only), flush=True)
        except (PackError, SwitchyardError) as exc:
            print(f"pack_run: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
