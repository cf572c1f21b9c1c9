"""Writes tests/fixtures/config_hashes.json: for every shipped config x each override set below, the config hash and
the sha256 of its resolved dict as dumped in key order (or the error it raises). Generated first with the code before
config versioning (per-section serializers); tests/configs/test_config_version.py checks the current code against it.
Written again at layout 26, when e5 and no sentence windows became the default (every config that does not say
resolves differently since); the configs saved before it are the full dumps of `--saved-dumps`, written at layout 25,
which must load back unchanged.

    .venv/bin/python -m tests.configs.make_config_hashes
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

from switchyard.configs.loader import CONFIG_DIR, config_hash, config_to_dict, load_config
from switchyard.errors import ConfigError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "config_hashes.json"

# each set touches keys added after config hashes were first recorded (at a non-default value, or at the default
# they were added with, which must not change the hash), plus a few older keys
OVERRIDES: dict[str, list[str]] = {
    "none": [],
    "older-keys": ["rerank.top_k=9", "store.collection=other"],
    "vector-cache": ["embedding.vector_cache=/tmp/x"],
    "vector-replay": ["embedding.vector_cache=/tmp/x", "embedding.replay=true"],
    "embedding-new-at-default": ["embedding.vector_cache=null", "embedding.replay=false"],
    "llm-replay": ["llm.cache_dir=/tmp/c", "llm.replay=true"],
    "e5-on": ["retrieve.retrievers.e5.enabled=true", "retrieve.fusion.weights.e5=0.3"],
    "e5-settings": [
        "retrieve.retrievers.e5.model=/tmp/e5",
        "retrieve.retrievers.e5.batch_size=8",
        "retrieve.retrievers.e5.query_prefix=q",
        "retrieve.retrievers.e5.passage_prefix=p",
    ],
    "e5-top-k": ["retrieve.retrievers.e5.top_k=50"],
    "e5-at-default": ["retrieve.retrievers.e5.model=e5-small", "retrieve.retrievers.e5.batch_size=16"],
    "vector-field": ["retrieve.retrievers.vector_fields.alt.model=minilm"],
    "vector-field-on": [
        "retrieve.retrievers.vector_fields.alt.model=minilm",
        "retrieve.retrievers.vector_fields.alt.enabled=true",
        "retrieve.fusion.weights.alt=0.2",
    ],
    "no-documents": ["graph.no_documents.detect=false"],
    "no-documents-reply": ["graph.no_documents.behaviour=reply", "graph.no_documents.message=hi"],
    "no-documents-at-default": ["graph.no_documents.detect=true"],
    "ray": ["ray.actors=4", "ray.cpus_per_actor=2"],
    "ray-at-default": ["ray.actors=2"],
    "memory-tokens": ["graph.router.memory_tokens=400"],
    "direct-reply": ["graph.router.direct_reply=true"],
    "router-at-default": ["graph.router.memory_tokens=160", "graph.router.direct_reply=false"],
    "approve": ["graph.router.approve=true", "graph.router.approve_timeout_s=60"],
    "fallback-coverage": ["answer.fallback_coverage=0.7"],
    "fallback-at-default": ["answer.fallback_coverage=0.6"],
}


def shipped() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def entry(name: str | None, overrides: list[str]) -> dict:
    try:
        config = load_config(name, overrides)
    except ConfigError as exc:
        return {"error": str(exc)}
    dump = json.dumps(config_to_dict(config), sort_keys=False)
    return {"hash": config_hash(config), "dump_sha256": hashlib.sha256(dump.encode()).hexdigest()}


def table() -> dict:
    return {
        (name or "(defaults)"): {label: entry(name, overrides) for label, overrides in OVERRIDES.items()}
        for name in [None, *shipped()]
    }


# configs as saved before a default changed (layout 25: before e5 and no sentence windows became the default): their
# full dumps, as `ask --json`, eval manifests and saved configs hold them; they must load back to the same config
SAVED_DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "config_dumps_v25.json.gz"
SAVED_OVERRIDE_SETS = ("none", "older-keys", "e5-on", "e5-top-k", "vector-field-on", "ray")


def saved_dumps() -> dict:
    """{config: {override set: {"dump": its full dump, "hash": its hash}}} for the sets that load."""
    out: dict = {}
    for name in [None, *shipped()]:
        for label in SAVED_OVERRIDE_SETS:
            try:
                config = load_config(name, OVERRIDES[label])
            except ConfigError:
                continue
            out.setdefault(name or "(defaults)", {})[label] = {
                "dump": config_to_dict(config),
                "hash": config_hash(config),
            }
    return out


if __name__ == "__main__" and sys.argv[1:] == ["--saved-dumps"]:  # run once, at layout 25
    SAVED_DUMPS.write_bytes(gzip.compress(json.dumps(saved_dumps(), sort_keys=True).encode(), mtime=0))
    print(f"{SAVED_DUMPS}: {sum(map(len, json.loads(gzip.decompress(SAVED_DUMPS.read_bytes())).values()))} dumps")
elif __name__ == "__main__":
    FIXTURE.write_text(json.dumps(table(), indent=None, separators=(",", ":"), sort_keys=True) + "\n")
    data = json.loads(FIXTURE.read_text())
    loaded = sum("hash" in e for cfg in data.values() for e in cfg.values())
    print(f"{FIXTURE}: {len(data)} configs x {len(OVERRIDES)} override sets, {loaded} load")
