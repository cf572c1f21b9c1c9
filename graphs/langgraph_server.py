"""The graph factories `langgraph.json` points LangGraph's own tooling at (`langgraph dev`, LangGraph Server,
Studio): `make_graph` builds the compiled graph of the pipeline an assistant's `configurable` names (one question per
run), `make_chat_graph` a chat graph around it whose threads keep the conversation's messages, and `ServedRunContext`
is the runtime context of a run the server starts. In Python, use `switchyard.Pipeline` instead."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import get_runtime
from pydantic import BaseModel
from typing_extensions import TypedDict  # on Python < 3.12, LangGraph Server's schemas need this TypedDict

from switchyard.configs.loader import CONFIG_DIR, load_config, resolve_config_path
from switchyard.configs.schema import SwitchyardConfig
from switchyard.conversation import split_last_question
from switchyard.errors import ConfigError
from switchyard.extras import check_config
from switchyard.graphs.build import build_graph
from switchyard.graphs.pipeline import Turn
from switchyard.nodes.resources import Resources, SharedModels
from switchyard.run_context import RunContext

_SERVED_MODELS = SharedModels()  # the loaded models of every graph make_graph built, shared by equal settings
_SERVED_GRAPHS: dict[tuple, tuple[SwitchyardConfig, Any]] = {}  # key -> (its config, its compiled graph)
_SERVED_CHATS: dict[tuple, Any] = {}  # key -> the chat graph around that graph
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
    return _served(config)[2]


def _served(config: dict | None) -> tuple[tuple, SwitchyardConfig, Any]:
    """(cache key, loaded config, compiled graph) of the pipeline `config`'s `configurable` names, built once."""
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
            _SERVED_GRAPHS[key] = (
                loaded,
                graph.copy(update={"checkpointer": None, "context_schema": ServedRunContext}),
            )
        return key, *_SERVED_GRAPHS[key]


# -- the chat graph -----------------------------------------------------------------------------------------------
class ChatState(TypedDict):
    """LangGraph's chat convention (what Studio's chat view and the SDK send): the thread's messages."""

    messages: Annotated[list[AnyMessage], add_messages]


def make_chat_graph(config: dict | None = None):
    """The graph `switchyard-chat` of `langgraph.json`: a conversation on a LangGraph Server thread. Its state is
    `messages` (LangGraph's `add_messages` convention: `{"messages": [{"role": "user", "content": "..."}]}`); its
    one node, `respond`, asks the last user message with the earlier messages as its history, through the graph
    `make_graph` builds for the same `configurable` (pipeline, index_dir, overrides; built and cached with it, on the
    same models), called as a subgraph (`stream_subgraphs=True` streams its node updates), and appends the reply:
    an `AIMessage` whose content is the answer and its numbered sources and whose `response_metadata` holds
    `answer`, `short_answer`, `citations`, `standalone` (the question as retrieval read it; None without history),
    `abstained`, `verdict` and `run_id`. The server's checkpointer keeps the messages per thread, so the turns
    accumulate there; the history a turn sends the pipeline holds earlier replies without their sources (their
    `response_metadata["answer"]`), as `Pipeline.ask(thread_id=...)` keeps them.

    `HistoryError` when the messages do not end with a user message or do not parse (system and tool messages are
    ignored; content may be a string or text parts); `ConfigError` for a pipeline that pauses for approval
    (graph.router.approve: use the graph `switchyard` on a thread). Its context schema is `ServedRunContext`, passed
    on to the pipeline's run; the pipeline's graph.recursion_limit bounds its run. It has no checkpointer of its
    own (the server's keeps the threads); in Python, give it one:
    `make_chat_graph(...).copy(update={"checkpointer": InMemorySaver()})`."""
    key, loaded, rag = _served(config)
    if loaded.graph.mode == "agent" and loaded.graph.router.approve:
        raise ConfigError(
            "the chat graph does not run a pipeline that pauses for approval (graph.router.approve); "
            "run it with the graph switchyard on a thread"
        )
    with _SERVED_LOCK:
        if key not in _SERVED_CHATS:
            _SERVED_CHATS[key] = _chat_graph(loaded, rag)
        return _SERVED_CHATS[key]


def _chat_graph(loaded: SwitchyardConfig, rag: Any):
    limit = loaded.graph.recursion_limit

    def turn(state: ChatState, config: RunnableConfig) -> tuple[dict, RunnableConfig, RunContext]:
        """The pipeline's input, run config (the node's: a subgraph call) and run context for this turn."""
        history, question = split_last_question(_turns(state["messages"]))
        context = get_runtime().context or ServedRunContext()  # an in-process caller may give none
        return Turn(question, history).input(None), {**config, "recursion_limit": limit}, context

    def respond(state: ChatState, config: RunnableConfig) -> dict:
        graph_input, run_config, context = turn(state, config)
        return _reply(rag.invoke(graph_input, run_config, context=context), context)

    async def arespond(state: ChatState, config: RunnableConfig) -> dict:
        graph_input, run_config, context = turn(state, config)
        return _reply(await rag.ainvoke(graph_input, run_config, context=context), context)

    # both forms: under the server (async) the pipeline runs as the graph switchyard does; in Python, invoke works
    graph = StateGraph(ChatState, context_schema=ServedRunContext)
    graph.add_node("respond", RunnableLambda(respond, afunc=arespond, name="respond"))
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    return graph.compile(name=f"{rag.name}-chat")


def _turns(messages: list[AnyMessage]) -> list[Any]:
    """The thread's messages as turns: a reply of this graph as its answer without the sources."""
    turns: list[Any] = []
    for message in messages:
        answer = message.response_metadata.get("answer") if isinstance(message, AIMessage) else None
        turns.append({"role": "assistant", "content": answer} if isinstance(answer, str) and answer else message)
    return turns


def _reply(state: dict, context: RunContext) -> dict:
    """The chat graph's update: the pipeline's answer as an AI message, with its sources."""
    citations = [c.model_dump(mode="json") if isinstance(c, BaseModel) else dict(c) for c in state.get("citations", [])]
    answer = state.get("answer", "")
    lines = [
        f"[{c['n']}] {c['title']} — {c['source']}" + (f", p. {c['page']}" if c.get("page") else "") for c in citations
    ]
    metadata = {
        "answer": answer,
        "short_answer": state.get("short_answer", ""),
        "citations": citations,
        "standalone": state.get("standalone") if state.get("history") else None,
        "abstained": bool(state.get("abstained", False)),
        "verdict": state.get("verdict"),
        "run_id": context.run_id,
    }
    content = answer + ("\n\nSources:\n" + "\n".join(lines) if lines else "")
    return {"messages": [AIMessage(content=content, response_metadata=metadata)]}
