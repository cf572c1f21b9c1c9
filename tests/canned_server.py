"""Real HTTP servers on 127.0.0.1 for tests: `QuietHandler` (the request handler every test server shares),
`LoopbackServer` (one on a free port) and `CannedServer` (an OpenAI-compatible stand-in that misbehaves the same way
on every request)."""

import http.server
import json
import threading


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that logs nothing, reads a request with `read_body` and answers with `send_body` (or
    `send_chat_completion`)."""

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def send_body(self, body: bytes, content_type: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_chat_completion(self, text: str, usage: dict, stream: bool, model: str = "m") -> None:
        """Answers `text` as an OpenAI chat completion, or, for a `stream` request, as server-sent chunks the way
        OpenAI sends them with `include_usage`: the text, the finish reason, then the usage with no choices."""
        head = {"id": "x", "created": 0, "model": model}
        if not stream:
            self.send_body(
                json.dumps(
                    {
                        **head,
                        "object": "chat.completion",
                        "usage": usage,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                    }
                ).encode(),
                "application/json",
            )
            return
        chunk = {**head, "object": "chat.completion.chunk"}
        events = [
            {
                **chunk,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}],
            },
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**chunk, "choices": [], "usage": usage},
        ]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.send_body(body.encode(), "text/event-stream")

    def log_message(self, *args):
        pass


class LoopbackServer:
    """A real HTTP server on 127.0.0.1 (a thread per request) for `handler`, serving from construction until
    `close()` (or the end of a `with` block); `origin` is http://127.0.0.1:PORT, `url` its OpenAI-style base URL."""

    def __init__(self, handler: type[QuietHandler], port: int = 0):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.origin}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CannedServer(LoopbackServer):
    """A real HTTP server on 127.0.0.1 that answers every POST with a fixed body (HTTP `status`)."""

    def __init__(self, body: bytes, content_type: str = "application/json", status: int = 200):
        bodies = self.bodies = []  # every request body received, in order

        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                bodies.append(self.read_body())
                self.send_body(body, content_type, status)

        super().__init__(Handler)
