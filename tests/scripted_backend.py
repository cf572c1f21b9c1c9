"""`ScriptedBackend`: deterministic LLM replies for forcing control-flow paths in tests (a test stand-in, not part
of the library)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from switchyard.llm.backend import Messages, Reply, send_words
from switchyard.run_context import TokenSink


class ScriptedBackend:
    """Deterministic replies for tests: a list (consumed in order; the last one repeats) or a function."""

    name = "scripted"

    def __init__(self, replies: list[str | Reply] | Callable[[Messages, dict | None], str | Reply]):
        self.replies = replies
        self.calls: list[Messages] = []
        self.tools: list[tuple[list[dict] | None, str | dict | None]] = []  # (tools, tool_choice) of each call
        self._lock = threading.Lock()

    def chat(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        json_schema: dict | None = None,
        seed: int | None = None,
        on_token: TokenSink | None = None,
        cancelled: threading.Event | None = None,
        tools: list[dict] | None = None,
        tool_choice: str | dict | None = None,
    ) -> Reply:
        with self._lock:
            self.calls.append(messages)
            self.tools.append((tools, tool_choice))
            n = len(self.calls)
        text = (
            self.replies(messages, json_schema)
            if callable(self.replies)
            else self.replies[min(n, len(self.replies)) - 1]
        )
        if isinstance(text, Exception):
            raise text
        calls = []
        if isinstance(text, Reply):  # a reply with tool calls
            text, calls = text.text, text.tool_calls
        if on_token is not None:
            send_words(text, on_token)
        return Reply(
            text,
            sum(len(m["content"].split()) for m in messages),
            len(text.split()) + sum(len(c["arguments"].split()) for c in calls),
            list(calls),
        )
