"""A real OpenAI-compatible chat server on 127.0.0.1 whose replies are a function of the messages: scripted LLM
runs for processes a test starts (`cli.py ask`, `cli.py serve`) through `llm.base_url`."""
from __future__ import annotations

import http.server
import json
import threading
from typing import Callable


class ScriptedOpenAIServer:
    """POST /v1/chat/completions answers `reply(messages)` as a chat completion (or a stream of one chunk)."""

    def __init__(self, reply: Callable[[list[dict]], str]):
        self.calls = 0

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.calls += 1
                text = reply(request["messages"])
                usage = {"prompt_tokens": 1, "completion_tokens": len(text.split()), "total_tokens": 1}
                if request.get("stream"):
                    chunks = [{"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
                              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}]
                    head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "scripted"}
                    body = "".join(f"data: {json.dumps({**head, **c})}\n\n" for c in chunks) + "data: [DONE]\n\n"
                    self._send(body.encode(), "text/event-stream")
                    return
                body = {"id": "x", "object": "chat.completion", "created": 0, "model": "scripted", "usage": usage,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}]}
                self._send(json.dumps(body).encode(), "application/json")

            def _send(self, body: bytes, content_type: str):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
