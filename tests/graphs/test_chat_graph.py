"""The chat graph of `langgraph.json` (`switchyard-chat`, graphs/langgraph_server.py `make_chat_graph`) in process,
without a server: compiled with an in-memory checkpointer, a thread keeps its messages, so a follow-up is answered
with the turns before it. tests/graphs/test_langgraph_server.py runs the same under a real `langgraph dev`."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from switchyard.errors import ConfigError, HistoryError
from switchyard.graphs.langgraph_server import ServedRunContext, make_chat_graph, make_graph

FIRST = "Who patented the knuckle coupler?"
FOLLOW_UP = "What year was that?"


@pytest.fixture
def chat(sample_index):
    """The no-llm chat graph over the sample index, with a checkpointer of its own."""
    graph = make_chat_graph({"configurable": {"pipeline": "no-llm", "index_dir": str(sample_index)}})
    return graph.copy(update={"checkpointer": InMemorySaver()})


def thread(name: str) -> dict:
    return {"configurable": {"thread_id": name}}


def test_a_thread_keeps_the_turns_and_answers_a_follow_up_with_them(chat, sample_index):
    first = chat.invoke({"messages": [{"role": "user", "content": FIRST}]}, thread("a"))
    reply = first["messages"][-1]
    assert isinstance(reply, AIMessage) and "Eli Janney" in reply.content
    assert "\n\nSources:\n[1] Railway couplers — " in reply.content
    meta = reply.response_metadata
    assert meta["citations"][0]["title"] == "Railway couplers" and not meta["abstained"]
    assert meta["standalone"] is None and meta["answer"] in reply.content and meta["run_id"]

    # the second turn sends only the new question, as text parts; the thread holds the first turn
    parts = [{"type": "text", "text": FOLLOW_UP}]
    second = chat.invoke({"messages": [HumanMessage(content=parts)]}, thread("a"), context=ServedRunContext(seed=3))
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]
    follow_up = second["messages"][-1]
    assert follow_up.content.startswith("1873") and follow_up.response_metadata["short_answer"] == "1873"
    assert "knuckle coupler" in follow_up.response_metadata["standalone"]  # the question as retrieval read it
    assert len(chat.get_state(thread("a")).values["messages"]) == 4

    # a fresh thread has no earlier turn to refer to
    alone = chat.invoke({"messages": [{"role": "user", "content": FOLLOW_UP}]}, thread("b"))
    assert "1873" not in alone["messages"][-1].content


def test_async_and_the_pipelines_graph_as_a_subgraph(chat):
    """Under the server the graph runs async; the pipeline's node updates stream with subgraphs."""

    async def run():
        return [
            chunk
            async for chunk in chat.astream(
                {"messages": [{"role": "human", "content": FIRST}]}, thread("c"), stream_mode="updates", subgraphs=True
            )
        ]

    chunks = asyncio.run(run())
    inner = [next(iter(update)) for namespace, update in chunks if namespace]
    assert inner == ["rewrite", "retrieve", "rerank", "grade", "answer"]
    assert chunks[-1][0] == () and "Eli Janney" in chunks[-1][1]["respond"]["messages"][-1].content


def test_messages_must_end_with_a_question(chat):
    ended = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "Eli Janney."}]
    with pytest.raises(HistoryError, match="the messages must end with a user message"):
        chat.invoke({"messages": ended}, thread("d"))
    with pytest.raises(HistoryError):
        chat.invoke({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}, thread("e"))


def test_built_once_beside_the_pipelines_graph_and_no_approve_pipeline(sample_index):
    def configurable(pipeline: str) -> dict:
        return {"configurable": {"pipeline": pipeline, "index_dir": str(sample_index), "thread_id": "x"}}

    chat = make_chat_graph(configurable("no-llm"))
    assert make_chat_graph(configurable("no-llm.yaml")) is chat
    assert chat.context_schema is ServedRunContext and chat.checkpointer is None
    assert make_graph(configurable("no-llm")).name + "-chat" == chat.name
    with pytest.raises(ConfigError, match="pauses for approval"):
        make_chat_graph(configurable("agent-approve"))
