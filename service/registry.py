"""The pipelines a server serves, by name (a config file's stem), each for any collection.

The named configs are loaded and checked at start. A request for another collection gets a pipeline built from the
same config with `store.collection` changed, sharing the loaded LLM and embedding model; it is built once and kept.
"""

from __future__ import annotations

import threading
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

from switchyard.configs.loader import load_config, resolve_config_path
from switchyard.configs.schema import SwitchyardConfig
from switchyard.errors import UnknownPipeline
from switchyard.extras import check_config
from switchyard.graphs.conversations import ConversationStore
from switchyard.graphs.draw import render
from switchyard.graphs.pipeline import Pipeline
from switchyard.nodes.resources import SharedModels
from switchyard.retrievers.stack import RetrievalStack


class PipelineRegistry:
    """`checkpointer`: where the pipelines that pause for approval (graph.router.approve) keep their paused runs;
    set it before the first `get` (the service does, once it knows where the index is)."""

    def __init__(self, config_paths: tuple[str, ...], overrides: tuple[str, ...] = ()):
        self.overrides = list(overrides)
        self.checkpointer: BaseCheckpointSaver | None = None
        self.conversations: ConversationStore | None = None  # the service's conversation threads, shared by all
        self.models = SharedModels()  # every pipeline's loaded LLM and embedding model, shared by equal settings
        self.paths: dict[str, Path] = {}
        for path in config_paths:
            resolved = resolve_config_path(path)
            self.paths[resolved.stem] = resolved
        self.configs: dict[str, SwitchyardConfig] = {n: load_config(p, self.overrides) for n, p in self.paths.items()}
        for config in self.configs.values():
            check_config(config)  # a config whose extra is missing: the server refuses to start, with that line
        self.default = next(iter(self.configs))
        self._pipelines: dict[tuple[str, str], Pipeline] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return list(self.configs)

    def get(self, name: str | None = None, collection: str | None = None) -> Pipeline:
        name = name or self.default
        if name not in self.configs:
            raise UnknownPipeline(name, self.names())
        collection = collection or self.configs[name].store.collection
        key = (name, collection)
        with self._lock:
            if key not in self._pipelines:
                self._pipelines[key] = self._build(name, collection)
            return self._pipelines[key]

    def _build(self, name: str, collection: str) -> Pipeline:
        config = self.configs[name]
        if collection != config.store.collection:
            config = load_config(self.paths[name], [*self.overrides, f"store.collection={collection}"])
        return Pipeline(config, self.models, self.checkpointer, self.conversations)

    def pauses(self) -> bool:
        """Does any served pipeline pause for approval (graph.router.approve)?"""
        return any(c.graph.mode == "agent" and c.graph.router.approve for c in self.configs.values())

    def warm_up(self) -> None:
        for name in self.names():
            self.get(name).warm_up()

    def stack(self, collection: str) -> RetrievalStack:
        """The retrieval stack of the default pipeline for `collection` (ingest, list, delete)."""
        return self.get(self.default, collection).resources.stack

    def describe(self) -> list[dict]:
        return [
            {
                "name": n,
                "mode": c.graph.mode,
                "config": str(self.paths[n]),
                "mermaid": render(self.get(n).graph, "mermaid"),
                "approve": self.get(n).pauses,
            }
            for n, c in self.configs.items()
        ]
