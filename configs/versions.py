"""Versions of the config layout: every key added to the config since its hashes were first recorded, with the
default it was added with.

A config is dumped (`SwitchyardConfig.model_dump`, `config_to_dict`, so its hash, `ask --json`'s resolved config,
saved configs and eval manifests) without each key of `ADDED_KEYS` that holds the default it was added with: that
key did not exist before, and the config behaves as it did without it. So the dump and the hash of every config made
before stay identical, and the dump loads back to the same config. A key set to another value is dumped, and then
changes the hash, as it changes what the config does.

To add a config key: add the field with its default to its section in configs/schema.py, add one row here with
version `CONFIG_VERSION + 1`, and bump `CONFIG_VERSION`. Hashes made before stay valid. (Version 1 is the layout of
2026-11-24, when config hashes were first kept stable; configs recorded before it lack `ingest.window_tokens`,
`ingest.window_overlap` and `retrieve.retrievers.dense.query_adapter`, added before there was a table.)

A default that changes is a row of `CHANGED_DEFAULTS` (a version of its own): configs saved before hold the key
explicitly or say what it was by another key, and the schema reads them as they were (the row says how); the
golden dumps of layout 25 (tests/fixtures/config_dumps_v25.json.gz) load back to the same config and hash.

This module imports nothing from the rest of Switchyard; configs/schema.py applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AddedKey:
    """One key added to the config: its dotted path, the JSON value it was added with (a section: its dump as of
    that version, without the keys added to it later) and the layout version that added it."""

    path: str
    default: Any
    version: int


ADDED_KEYS: tuple[AddedKey, ...] = (
    AddedKey("graph.router.memory_tokens", 160, 2),
    AddedKey(
        "graph.no_documents",
        {"detect": True, "behaviour": "abstain", "message": "Hello! Ask me a question about the indexed documents."},
        3,
    ),
    AddedKey("graph.router.direct_reply", False, 4),
    AddedKey("graph.router.approve", False, 5),
    AddedKey("graph.router.approve_timeout_s", 3600.0, 6),
    AddedKey("ray", {"actors": 2, "cpus_per_actor": 1.0, "gpus_per_actor": 0.0}, 7),
    AddedKey("answer.fallback_coverage", 0.6, 8),
    AddedKey("retrieve.retrievers.e5", {"enabled": False, "top_k": 100}, 9),
    AddedKey("embedding.vector_cache", None, 10),
    AddedKey("embedding.replay", False, 11),
    AddedKey("retrieve.retrievers.vector_fields", {}, 12),
    AddedKey("retrieve.retrievers.e5.model", "e5-small", 13),
    AddedKey("retrieve.retrievers.e5.query_prefix", "query: ", 14),
    AddedKey("retrieve.retrievers.e5.passage_prefix", "passage: ", 15),
    AddedKey("retrieve.retrievers.e5.batch_size", 16, 16),
    AddedKey("rerank.fused_weight", 0.0, 17),
    AddedKey("llm.context_window", None, 18),
    AddedKey("retrieve.injection_policy", "exclude", 19),
    AddedKey("retrieve.injection_threshold", 0.6, 20),
    AddedKey("answer.spotlight", "none", 21),
    AddedKey("store.reindex_min_rows", 256, 22),
    AddedKey(
        "conversation",
        {
            "method": "terms",
            "turns": 2,
            "max_words": 1,
            "terms": 6,
            "decay": 0.5,
            "answer_terms": 0,
            "fuse": True,
            "answer_turns": 2,
            "expire_s": 86400.0,
        },
        23,
    ),
    AddedKey("retrieve.fusion.adaptive_signal", "confidence", 24),
    AddedKey("retrieve.fusion.adaptive_k", 3, 25),
)


@dataclass(frozen=True)
class ChangedDefault:
    """One default that changed: its dotted path, the value it had before, the layout version that changed it, and
    how a config written before is still read as it was."""

    path: str
    before: Any
    version: int
    kept_by: str


NO_E5_WEIGHTS: dict[str, float] = {"bm25": 0.5, "dense": 0.5}
"""retrieve.fusion.weights when a config gives none and has e5 off: the default before layout 26."""

# e5 with chunk vectors, no sentence windows: the third selection rule's pick on the retrieval suite's dev splits, at
# or above the best single list within noise on every test split (docs/benchmarks.md, issue 75)
CHANGED_DEFAULTS: tuple[ChangedDefault, ...] = (
    ChangedDefault(
        "retrieve.retrievers.e5.enabled",
        False,
        26,
        "a config that gives retrieve.fusion.weights without e5 (every config saved before does), or retrieves with "
        "bm25 or dense alone, has e5 off unless it says otherwise",
    ),
    ChangedDefault(
        "retrieve.fusion.weights",
        NO_E5_WEIGHTS,
        26,
        "every config saved before holds its weights; with e5 off, the weights left out are these",
    ),
    ChangedDefault("ingest.window_tokens", 64, 26, "every config saved before holds it"),
)

CONFIG_VERSION: int = 26
"""The current version of the config layout: 1 + the keys added since version 1 (one version per row) + the
versions that changed defaults."""


def _without(data: Any, path: list[str], default: Any) -> Any:
    """`data` without the key at `path` when it holds `default`; the dicts along the path are copied, not changed."""
    key, rest = path[0], path[1:]
    if not isinstance(data, dict) or key not in data:
        return data
    if not rest:
        return {k: v for k, v in data.items() if k != key} if data[key] == default else data
    inner = _without(data[key], rest, default)
    return data if inner is data[key] else {**data, key: inner}


def canonical_dump(data: dict) -> dict:
    """A full config dump (`model_dump`, python or json mode) without each added key that holds the default it was
    added with, in the order of the other keys. Rows are undone newest first, so a section's own added keys are gone
    before the section is compared with the value it was added with."""
    for row in sorted(ADDED_KEYS, key=lambda r: r.version, reverse=True):
        data = _without(data, row.path.split("."), row.default)
    return data
