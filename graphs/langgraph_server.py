"""The graph factory `langgraph.json` points LangGraph's own tooling at (`langgraph dev`, LangGraph Server, Studio):
`make_graph` builds the compiled graph of the pipeline an assistant's `configurable` names, and `ServedRunContext` is
the runtime context of a run the server starts. In Python, use `switchyard.Pipeline` instead."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from switchyard.configs.loader import CONFIG_DIR, load_config, resolve_config_path
from switchyard.errors import ConfigError
from switchyard.extras import check_config
from switchyard.graphs.build import build_graph
from switchyard.nodes.resources import Resources, SharedModels
from switchyard.run_context import RunContext

_SERVED_MODELS = SharedModels()  # the loaded models of every graph make_graph built, shared by equal settings
_SERVED_GRAPHS: dict[tuple, Any] = {}
_SERVED_LOCK = threading.Lock()
# listed once here: LangGraph dev rejects a directory listing on its event loop, where make_graph runs
_SHIPPED_CONFIGS = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


class _ServedContextSchema(BaseModel):
    """What a LangGraph Server run may set in its context (the JSON schema the server and Studio show)."""

    run_id: str | None = None
    seed: int | None = None
    groups: list[str] | None = None


class ServedRunContext(RunContext):
    """The `RunContext` of a run LangGraph Server starts. The server hands LangGraph the run's context as a dict
    (without a `context` from the caller: the assistant's and the run's `configurable`, thread_id, pipeline and
    all), which LangGraph turns into the graph's context schema by calling it with that dict: this one keeps what a
    caller may set (`run_id`, `seed`, `groups`) and ignores the rest; the per-run objects are made fresh."""

    def __init__(self, **values):
        kept = {k: values[k] for k in _ServedContextSchema.model_fields if values.get(k) is not None}
        if "groups" in kept:
            kept["groups"] = tuple(kept["groups"])
        super().__init__(**kept)

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        return handler(_ServedContextSchema)


def make_graph(config: dict | None = None):
    """The graph factory `langgraph.json` points LangGraph's own tooling at (`langgraph dev`, LangGraph Server,
    Studio): the compiled graph for the run's `configurable`, which an assistant sets
    (`client.assistants.create(graph_id="switchyard", config={"configurable": {...}})`):

    - `pipeline`: a shipped config by name (`fixed`, `no-llm`, `agent`, `agent-approve`, ...) or a config file's
      path (relative: to the server's working folder); default: the built-in defaults;
    - `index_dir`: the index folder (`store.uri`);
    - `overrides`: `--set`-style overrides, a list of `"a.b=c"` strings, applied last.

    A bad value raises `ConfigError`; a config whose extra is missing, `MissingExtra`. Graphs are built once per
    (pipeline, index_dir, overrides) and kept, so the server's repeated calls (one per run and per schema read) cost
    nothing; all of them share one `SharedModels`, so models load once, on first use. The graph has no checkpointer
    of its own: under the server, the server's keeps its threads, so a pipeline that pauses for approval
    (graph.router.approve) runs on a thread and resumes with `Command(resume=Approval(...).model_dump())` (in the
    SDK: `command={"resume": {"decision": "approve"}}`); there, a pause does not expire (graph.router.
    approve_timeout_s is `Pipeline.resume`'s). Its context schema is `ServedRunContext`. In Python, use `Pipeline`
    (which also applies graph.recursion_limit and keeps paused runs)."""
    configurable = (config or {}).get("configurable") or {}
    pipeline, index_dir = configurable.get("pipeline"), configurable.get("index_dir")
    overrides = configurable.get("overrides") or []
    if isinstance(overrides, str):
        overrides = [overrides]
    if not isinstance(overrides, (list, tuple)) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f'configurable.overrides: a list of "a.b=c" strings, got {overrides!r}')
    for name, value in (("pipeline", pipeline), ("index_dir", index_dir)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"configurable.{name}: a string, got {value!r}")
    if (
        pipeline
        and Path(pipeline).parent == Path(".")
        and not Path(pipeline).is_file()
        and Path(pipeline).name.removesuffix(".yaml") not in _SHIPPED_CONFIGS
    ):
        raise ConfigError(f"config file not found: {pipeline} (shipped configs: {', '.join(_SHIPPED_CONFIGS)})")
    path = str(resolve_config_path(pipeline)) if pipeline else None
    settings = [*([f"store.uri={index_dir}"] if index_dir else []), *overrides]
    key = (path, tuple(settings))
    with _SERVED_LOCK:
        if key not in _SERVED_GRAPHS:
            loaded = load_config(path, settings)
            check_config(loaded)
            graph = build_graph(loaded, Resources(loaded, _SERVED_MODELS))
            _SERVED_GRAPHS[key] = graph.copy(update={"checkpointer": None, "context_schema": ServedRunContext})
        return _SERVED_GRAPHS[key]
