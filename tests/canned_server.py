"""Real HTTP servers on 127.0.0.1 for tests: `QuietHandler` (the request handler every test server shares),
`LoopbackServer` (one on a free port), `CannedServer` (an OpenAI-compatible stand-in that misbehaves the same way
on every request) and `ContextLimitedServer` (one with a small context window, refusing longer prompts as real
servers word it)."""

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


class ContextLimitedServer(LoopbackServer):
    """A real HTTP server on 127.0.0.1 with a context of `context_tokens` (a token = 4 characters of content, plus
    10 a message): a longer request is refused with HTTP 400 and `refusal`'s wording, as a real server words it.
    `says`: how it tells its window, as vLLM (`max_model_len` in /v1/models) or llama-server (`/props`); None = not
    at all. `requests` holds every chat request's messages, `bodies` the whole requests, `asked` the GET paths."""

    REFUSALS = {
        "llama-cpp-python": lambda ctx, prompt, completion: {
            "error": {
                "message": f"This model's maximum context length is {ctx} tokens. However, you requested "
                f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
            }
        },
        "llama-server": lambda ctx, prompt, completion: {
            "error": {
                "code": 400,
                "message": f"request ({prompt} tokens) exceeds the available context size ({ctx} tokens)",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": ctx,
            }
        },
    }

    def __init__(
        self,
        context_tokens: int,
        refusal: str,
        generates_into_context: bool = False,
        says: str | None = None,
        json_reply: str = "{}",
    ):
        """`generates_into_context`: a request with tools, or one that asks for no JSON, overflows, counted at the
        context plus one token, as llama-cpp-python's server counts a tool call it generated past max_tokens; one
        that asks for JSON without tools is answered `json_reply`."""
        requests, bodies, asked = self.requests, self.bodies, self.asked = [], [], []
        words = self.REFUSALS[refusal]

        class Handler(QuietHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                asked.append(self.path)
                if self.path == "/v1/models":
                    entry = {"id": "m", "object": "model", "owned_by": "me"}
                    if says == "vllm":
                        entry["max_model_len"] = context_tokens
                    self.send_body(json.dumps({"object": "list", "data": [entry]}).encode(), "application/json")
                elif self.path == "/props" and says == "llama-server":
                    props = {"default_generation_settings": {"n_ctx": context_tokens}, "total_slots": 1}
                    self.send_body(json.dumps(props).encode(), "application/json")
                else:
                    self.send_body(b'{"error": "not found"}', "application/json", status=404)

            def do_POST(self):  # noqa: N802 - the http.server API
                body = json.loads(self.read_body())
                requests.append(body["messages"])
                bodies.append(body)
                prompt = sum(len(m["content"]) // 4 + 10 for m in body["messages"])
                if generates_into_context and (body.get("tools") or "response_format" not in body):
                    prompt = context_tokens + 1
                completion = body.get("max_tokens") or body.get("max_completion_tokens") or 0
                if prompt + completion > context_tokens:
                    self.send_body(
                        json.dumps(words(context_tokens, prompt, completion)).encode(),
                        "application/json",
                        status=400,
                    )
                    return
                text = json_reply if "response_format" in body else f"read {prompt} tokens"
                usage = {"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3}
                self.send_chat_completion(text, usage, bool(body.get("stream")))

        super().__init__(Handler)
