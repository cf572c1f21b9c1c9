"""Conversation threads: the turns of each conversation, kept per `thread_id` by a LangGraph checkpointer, so that a
caller can ask `pipeline.ask(question, thread_id="t1")` turn after turn and let the pipeline remember.

A thread is one small LangGraph graph's checkpointed state (`ThreadState`): its messages (question, answer, question,
...), its owner (the service's key that made it; None in a library) and when it was last used. The checkpointer is
LangGraph's: in memory by default, SQLite on a server (`SqliteSaver`), any `BaseCheckpointSaver` a caller passes. A
thread unused for `expire_s` is forgotten on its next read (`ConversationExpired`, then unknown); `delete` forgets it
now. Appending is serialised per store (one lock) and, on disk, across processes (an exclusive `flock` on a file
beside the database): two turns of one thread at once both land, in order, whichever process adds them.

    store = ConversationStore(expire_s=3600)
    store.append("t1", "Who patented the knuckle coupler?", "Eli Janney [1]")
    store.turns("t1")      # [Message(role='user', ...), Message(role='assistant', ...)]
"""

from __future__ import annotations

import contextlib
import fcntl
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from switchyard.conversation import MAX_MESSAGES, Message, as_dicts, as_history
from switchyard.errors import ConversationExpired, QuestionError, StoreError, UnknownConversation, first_line

CONVERSATIONS_NAME = ".switchyard-conversations.sqlite3"


def conversations_path(store_uri: str, elsewhere: Path) -> Path:
    """Where threads are kept on disk: beside a local index, else (object storage) in `elsewhere`."""
    if store_uri.startswith("file://"):
        store_uri = store_uri[len("file://") :]
    return (Path(elsewhere) if "://" in store_uri else Path(store_uri)) / CONVERSATIONS_NAME


class ThreadState(TypedDict, total=False):
    messages: Annotated[list[dict], operator.add]
    owner: str | None
    updated_at: float


def _keep(state: ThreadState) -> dict:
    return {}


def _graph(checkpointer: BaseCheckpointSaver):
    graph = StateGraph(ThreadState)
    graph.add_node("keep", _keep)
    graph.add_edge(START, "keep")
    graph.add_edge("keep", END)
    return graph.compile(checkpointer=checkpointer, name="switchyard-conversation")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path`, held for the block (every process of one machine takes the same file)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the file releases the lock


def _checked_id(thread_id: str) -> str:
    if not isinstance(thread_id, str) or not thread_id.strip() or len(thread_id) > 200:
        raise QuestionError("a thread_id is a non-empty string of at most 200 characters")
    return thread_id


class ConversationStore:
    """The turns of conversation threads in a LangGraph checkpointer (`checkpointer`, default in memory)."""

    @classmethod
    def on_disk(cls, path: Path, expire_s: float = 86400.0) -> ConversationStore:
        """Threads in one SQLite file (LangGraph's `SqliteSaver`): they outlive the process. `StoreError` when the
        file cannot be opened."""
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            saver = SqliteSaver(conn)
            saver.setup()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot keep conversations in {path}: {first_line(exc)}") from exc
        return cls(saver, expire_s, shared_lock=lambda: _file_lock(Path(path).with_name(Path(path).name + ".lock")))

    def close(self) -> None:
        """Close the file of an `on_disk` store (nothing for others)."""
        conn = getattr(self.checkpointer, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            conn.close()

    def __init__(
        self,
        checkpointer: BaseCheckpointSaver | None = None,
        expire_s: float = 86400.0,
        shared_lock: Callable[[], AbstractContextManager] | None = None,
    ):
        """`shared_lock`: a lock every process sharing the checkpointer takes around an append (a database's
        advisory lock); without it, appends are serialised within this process only (or by `on_disk`'s file)."""
        if expire_s <= 0:
            raise ValueError("expire_s must be > 0")
        self.expire_s = expire_s
        self.checkpointer = checkpointer or InMemorySaver()
        self._graph = _graph(self.checkpointer)
        self._lock = threading.Lock()
        self._shared_lock = shared_lock

    @contextlib.contextmanager
    def _appending(self) -> Iterator[None]:
        """Held while a turn is appended: this store's lock and the shared lock every process takes (each
        process's own connection would otherwise read the same last checkpoint and write over the other's turn)."""
        with self._lock, self._shared_lock() if self._shared_lock else contextlib.nullcontext():
            yield

    @staticmethod
    def _key(thread_id: str, owner: str | None) -> str:
        """The checkpointer's thread for an owner's `thread_id`: each owner has its own ids, so a key that picks an id
        another key already uses starts its own conversation (and learns nothing of the other's)."""
        _checked_id(thread_id)
        return thread_id if owner is None else f"{len(owner)}:{owner}:{thread_id}"

    def _config(self, thread_id: str, owner: str | None) -> dict:
        return {"configurable": {"thread_id": self._key(thread_id, owner)}}

    def _values(self, thread_id: str, owner: str | None) -> dict:
        return dict(self._graph.get_state(self._config(thread_id, owner)).values)

    def exists(self, thread_id: str, owner: str | None = None) -> bool:
        values = self._values(thread_id, owner)
        return bool(values) and values.get("owner") == owner

    def turns(self, thread_id: str, owner: str | None = None, *, missing_ok: bool = True) -> list[Message]:
        """The thread's messages, oldest first: [] for a new thread (`missing_ok`), else `UnknownConversation` for a
        thread that does not exist or belongs to another owner (the same words for both), `ConversationExpired` for
        one unused past `expire_s` (it is deleted)."""
        values = self._values(thread_id, owner)
        if not values:
            if missing_ok:
                return []
            raise UnknownConversation(f"no conversation {thread_id!r}")
        if values.get("owner") != owner:
            raise UnknownConversation(f"no conversation {thread_id!r}")
        if values.get("updated_at", 0.0) + self.expire_s <= time.time():
            self.delete(thread_id, owner)
            raise ConversationExpired(
                f"conversation {thread_id!r} was unused for over {self.expire_s:g} s and has expired; start a new one"
            )
        return as_history(values.get("messages", []))

    def append(self, thread_id: str, question: str, answer: str, owner: str | None = None) -> None:
        """One turn (the question and its answer) at the end of the thread, made if new."""
        with self._appending():
            earlier = self.turns(thread_id, owner)
            turn = as_dicts([Message(role="user", content=question), Message(role="assistant", content=answer)])
            update: dict = {"messages": turn, "owner": owner, "updated_at": time.time()}
            if len(earlier) + 2 > MAX_MESSAGES:  # a thread keeps its newest turns: drop the oldest
                update["messages"] = as_dicts(earlier[-(MAX_MESSAGES - 2) :]) + turn
                self.delete(thread_id, owner)
            self._graph.update_state(self._config(thread_id, owner), update, as_node="keep")

    def delete(self, thread_id: str, owner: str | None = None, *, check_owner: bool = False) -> None:
        """Forget a thread. With `check_owner`, `UnknownConversation` unless it exists and belongs to `owner`."""
        if check_owner and not self.exists(thread_id, owner):
            raise UnknownConversation(f"no conversation {_checked_id(thread_id)!r}")
        self.checkpointer.delete_thread(self._key(thread_id, owner))
