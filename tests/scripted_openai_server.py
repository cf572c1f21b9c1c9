"""A real OpenAI-compatible chat server on 127.0.0.1 whose replies are a function of the messages: scripted LLM
runs for processes a test starts (`cli.py ask`, `cli.py serve`) through `llm.base_url`."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.canned_server import LoopbackServer, QuietHandler


class ScriptedOpenAIServer(LoopbackServer):
    """POST /v1/chat/completions answers `reply(messages)` as a chat completion (or a stream)."""

    def __init__(self, reply: Callable[[list[dict]], str]):
        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                request = json.loads(self.read_body())
                text = reply(request["messages"])
                usage = {"prompt_tokens": 1, "completion_tokens": len(text.split()), "total_tokens": 1}
                self.send_chat_completion(text, usage, bool(request.get("stream")), model="scripted")

        super().__init__(Handler)
