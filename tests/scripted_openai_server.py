"""A real OpenAI-compatible chat server on 127.0.0.1 whose replies are a function of the messages: scripted LLM
runs for processes a test starts (`cli.py ask`, `cli.py serve`) through `llm.base_url`."""
from __future__ import annotations

import json
from typing import Callable

from tests.canned_server import LoopbackServer, QuietHandler


class ScriptedOpenAIServer(LoopbackServer):
    """POST /v1/chat/completions answers `reply(messages)` as a chat completion (or a stream of one chunk)."""

    def __init__(self, reply: Callable[[list[dict]], str]):
        self.calls = 0

        outer = self

        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                request = json.loads(self.read_body())
                outer.calls += 1
                text = reply(request["messages"])
                usage = {"prompt_tokens": 1, "completion_tokens": len(text.split()), "total_tokens": 1}
                if request.get("stream"):
                    chunks = [{"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
                              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}]
                    head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "scripted"}
                    body = "".join(f"data: {json.dumps({**head, **c})}\n\n" for c in chunks) + "data: [DONE]\n\n"
                    self.send_body(body.encode(), "text/event-stream")
                    return
                body = {"id": "x", "object": "chat.completion", "created": 0, "model": "scripted", "usage": usage,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}]}
                self.send_body(json.dumps(body).encode(), "application/json")

        super().__init__(Handler)
