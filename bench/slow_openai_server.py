"""A stand-in for a remote model: an OpenAI-compatible chat-completions server that waits a fixed delay per call.

    python bench/slow_openai_server.py --host 127.0.0.1 --port 8011 [--delay-ms 300] [--model-name slow-model]

Replies are valid and deterministic. With `response_format` (json_schema, or llama.cpp's json_object + schema) the
content is a minimal JSON instance of the schema; free text is the first sentence of passage [1] of the last user
message, cited as `[1]`. Requests are served concurrently (the delay is an `asyncio.sleep`), so the server measures
how well a client overlaps its calls, not how fast a model is. Streaming (SSE) and /v1/models are supported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

FALLBACK_ANSWER = "The passages do not say."
_PASSAGE_ONE = re.compile(r"^\[1\] (?:.*?): (.+)$", re.M)
_SENTENCE_END = re.compile(r"[.!?]\s+")
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "no", "co", "inc", "ltd", "mt", "ft"}


def _text(content) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _last_user(messages: list[dict]) -> str:
    return next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")


def first_sentence(text: str) -> str:
    for end in _SENTENCE_END.finditer(text):
        head = text[: end.start()]
        word = head.split()[-1] if head.split() else ""
        # an initial ("Eli H. Janney"), "U.S." or "Dr." does not end the sentence
        if len(word) > 1 and "." not in word and word.lower() not in _ABBREVIATIONS:
            return head
    return text


def free_text_reply(messages: list[dict]) -> str:
    match = _PASSAGE_ONE.search(_last_user(messages))
    if not match:
        return FALLBACK_ANSWER
    first = first_sentence(match.group(1).strip()).rstrip(".!? ")
    return f"{first} [1]." if first else FALLBACK_ANSWER


def _seed_words(messages: list[dict]) -> list[str]:
    """Words for string fields: the question if the last user message names one, else the message itself."""
    text = _last_user(messages)
    question = re.search(r"^Question:\s*(.+)$", text, re.M)
    words = re.findall(r"[\w'-]+", question.group(1) if question else text)
    return words or ["answer"]


def _string(schema: dict, words: list[str]) -> str:
    fmt = schema.get("format")
    fixed = {
        "date-time": "2024-01-01T00:00:00Z",
        "date": "2024-01-01",
        "time": "00:00:00",
        "email": "a@example.com",
        "uri": "https://example.com",
        "uuid": str(uuid.UUID(int=0)),
    }
    value = fixed.get(fmt) or " ".join(words[:6])
    value = value[: schema.get("maxLength", len(value))].strip()
    return value.ljust(schema.get("minLength", 0), "x")


def _number(schema: dict, integer: bool):
    lo, hi = schema.get("minimum"), schema.get("maximum")
    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if integer:
        if lo is None and ex_lo is not None:
            lo = math.floor(ex_lo) + 1
        if hi is None and ex_hi is not None:
            hi = math.ceil(ex_hi) - 1
        value = lo if lo is not None else 0
        return int(min(value, hi) if hi is not None else value)
    low = lo if lo is not None else ex_lo
    if lo is not None:
        value = lo
    elif ex_lo is not None:  # strictly inside: halfway to the upper bound if there is one
        high = hi if hi is not None else ex_hi
        value = (ex_lo + high) / 2 if high is not None else ex_lo + 1
    else:
        value = 0
    if hi is not None and value > hi:
        value = hi
    if ex_hi is not None and value >= ex_hi:
        value = (low + ex_hi) / 2 if low is not None else ex_hi - 1
    return value


def instance(schema: dict, defs: dict, words: list[str]):
    """A minimal value that validates against `schema` (the subset pydantic's model_json_schema() produces)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return instance({**defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}, defs, words)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            branches = [b for b in schema[key] if b.get("type") != "null"]
            return instance(branches[0], defs, words) if branches else None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        if "properties" in schema:
            kind = "object"
        elif "items" in schema or "prefixItems" in schema:
            kind = "array"
        elif "default" in schema:
            return schema["default"]
        else:
            kind = "string"
    if kind == "object":
        return {name: instance(sub, defs, words) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        if "prefixItems" in schema:
            return [instance(sub, defs, words) for sub in schema["prefixItems"]]
        item = schema.get("items", {})
        count = max(1, schema.get("minItems", 1))
        if schema.get("uniqueItems") and item.get("enum"):
            return item["enum"][:count]
        return [instance(item, defs, words) for _ in range(count)]
    if kind == "string":
        return _string(schema, words)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return True
    return None


def _schema(response_format) -> dict | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema") or {"type": "object"}
    if response_format.get("type") == "json_object":
        return response_format.get("schema") or {"type": "object"}
    return None


def reply_for(body: dict) -> tuple[str, str]:
    """(content, finish_reason) for a chat-completions request body."""
    messages = body.get("messages") or []
    schema = _schema(body.get("response_format"))
    if schema is not None:
        defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
        return json.dumps(instance(schema, defs, _seed_words(messages))), "stop"
    words = free_text_reply(messages).split()
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit and len(words) > limit:
        return " ".join(words[:limit]), "length"
    return " ".join(words), "stop"


def _usage(messages: list[dict], content: str) -> dict:
    prompt = sum(len(_text(m.get("content")).split()) for m in messages)
    completion = len(content.split())
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": None}}, status)


def make_app(delay_ms: float = 300, model_name: str = "slow-model") -> FastAPI:
    app = FastAPI(title="slow OpenAI-compatible server")
    delay = delay_ms / 1000

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0, "owned_by": "bench"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "'messages' must be a non-empty list")
        content, finish = reply_for(body)
        usage = _usage(body["messages"], content)
        head = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": body.get("model") or model_name,
        }
        if body.get("stream"):
            with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                _stream(head, content, finish, usage if with_usage else None, delay), media_type="text/event-stream"
            )
        await asyncio.sleep(delay)
        return {
            **head,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
        }

    return app


async def _stream(head: dict, content: str, finish: str, usage: dict | None, delay: float):
    def chunk(delta: dict, finish_reason: str | None = None) -> str:
        data = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if usage is not None:
            data["usage"] = None  # as OpenAI does: only the last chunk carries usage
        return f"data: {json.dumps(data)}\n\n"

    await asyncio.sleep(delay)
    yield chunk({"role": "assistant", "content": ""})
    for piece in re.findall(r"\S+\s*", content):
        yield chunk({"content": piece})
    yield chunk({}, finish)
    if usage is not None:
        yield f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--delay-ms", type=float, default=300, help="wait before every reply (default 300)")
    parser.add_argument("--model-name", default="slow-model", help="model id listed by /v1/models")
    args = parser.parse_args()
    uvicorn.run(make_app(args.delay_ms, args.model_name), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
