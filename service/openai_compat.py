"""`POST /v1/chat/completions`: Switchyard as an OpenAI-compatible model (Open WebUI, LibreChat, any OpenAI client).

- The last user message is the question, the messages before it its conversation (a follow-up is answered with
  them: switchyard.conversation; system messages are ignored); `model` picks the pipeline; an optional `collection` body field the
  collection. Sampling fields (temperature, max_tokens, ...) are accepted and ignored: the pipeline's config rules.
- The reply's content is the verified answer followed by its numbered sources; the same sources come as a
  structured `sources` field (on the completion, and on the last chunk of a stream).
- Streaming: answer tokens are sent as they are generated. They are provisional (citations are verified after
  generation); when the verified answer differs from what was streamed, it follows as "Verified answer: …" before
  the sources, so the text a client keeps always ends with the authoritative answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from switchyard.graphs.results import Answer, AskResult, ErrorEvent, RunStart, StreamEvent, Token


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage]
    stream: bool = False
    collection: str | None = None


def sources_of(result: AskResult) -> list[dict]:
    return [c.model_dump(mode="json") for c in result.citations]


def sources_text(result: AskResult) -> str:
    lines = [f"[{c.n}] {c.title} — {c.source}" + (f", p. {c.page}" if c.page else "") for c in result.citations]
    return "\n\nSources:\n" + "\n".join(lines) if lines else ""


def _usage(result: AskResult) -> dict:
    prompt, completion = result.usage.prompt_tokens, result.usage.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_completion(result: AskResult, model: str) -> dict:
    return {
        "id": f"chatcmpl-{result.run_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": result.answer + sources_text(result)},
            }
        ],
        "usage": _usage(result),
        "sources": sources_of(result),
        "switchyard": {"run_id": result.run_id, "abstained": result.abstained},
    }


OPENAI_PREFIX = "/v1/chat/"  # the routes whose every error, the authentication's included, is worded this way


def openai_error_body(status: int, message: str) -> dict:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "code": status}}


def openai_error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(openai_error_body(status, message), status_code=status, headers=headers)


async def chat_stream(events: AsyncIterator[StreamEvent], model: str) -> AsyncIterator[dict]:
    """Pipeline events -> `chat.completion.chunk` SSE data lines, ending with `[DONE]`."""
    created, run_id, streamed = int(time.time()), "", []

    def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
        return {
            "data": json.dumps(
                {
                    "id": f"chatcmpl-{run_id}",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    **extra,
                },
                ensure_ascii=False,
            )
        }

    async for event in events:
        if isinstance(event, RunStart):
            run_id = event.run_id
            yield chunk({"role": "assistant", "content": ""})
        elif isinstance(event, Token):
            streamed.append(event.text)
            yield chunk({"content": event.text})
        elif isinstance(event, Answer):
            result = event.result
            tail = (
                ""
                if "".join(streamed).strip() == result.answer.strip()
                else (("\n\nVerified answer: " if streamed else "") + result.answer)
            )
            yield chunk(
                {"content": tail + sources_text(result)}, "stop", usage=_usage(result), sources=sources_of(result)
            )
        elif isinstance(event, ErrorEvent):
            yield chunk({"content": f"\n\nerror: {event.message}"}, "error")
    yield {"data": "[DONE]"}
