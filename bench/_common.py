"""Helpers shared by the benchmark scripts (not part of the library)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"
sys.path.insert(0, str(ROOT))
from configs import runtime_env  # noqa: E402

runtime_env.apply()


def scifact_docs(limit: int | None = None) -> list[dict]:
    path = SHARED / "scifact" / "corpus.jsonl"
    if not path.is_file():
        sys.exit(f"benchmark data not found: {path} (the benchmarks read ../shared/datasets)")
    docs = []
    with path.open() as fh:
        for line in fh:
            docs.append(json.loads(line))
            if limit and len(docs) >= limit:
                break
    return docs


def scifact_queries(limit: int | None = None) -> list[str]:
    with (SHARED / "scifact" / "queries.jsonl").open() as fh:
        queries = [json.loads(line)["text"] for line in fh]
    return queries[:limit] if limit else queries


def write_resolved_config(config, out_dir: Path) -> Path:
    """Every benchmark run records the fully resolved config beside its output."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "config.resolved.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    return path


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a server a benchmark starts."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
