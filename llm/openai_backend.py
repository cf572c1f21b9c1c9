"""`OpenAIBackend`: the `openai` client against any OpenAI-compatible server (structured output via
`response_format=json_schema`; a reply that is not a chat completion is a misbehaving server, retried; a prompt the
server refuses as longer than its context is shortened the way the embedded backend shortens it, and sent again)."""

from __future__ import annotations

import json
import math
import os
import threading

from switchyard.errors import ContextOverflowError, LLMError, RunCancelled, TransientLLMError
from switchyard.llm.backend import Messages, Reply, counted_tokens, fit_messages, openai_client_error, openai_tool_calls
from switchyard.run_context import TokenSink

FIT_ATTEMPTS = 3  # requests a call may send: the prompt as given, then shortened by what each refusal said
_MARGIN_TOKENS = 16  # shortened past the reported overflow, as token estimates from characters are rough


class OpenAIBackend:
    name = "openai"

    def __init__(
        self,
        base_url: str | None,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        response_format: str = "json_schema",
        seed: int = 0,
    ):
        from openai import OpenAI

        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise LLMError(
                f"llm.backend=openai needs an API key in ${api_key_env} (or set llm.base_url for a local server)"
            )
        self.base_url, self.model = base_url, model
        self.response_format = response_format
        self.seed = seed  # sent when a call brings no seed of its own: every request names one (llm.seed)
        self.timeout_s = timeout_s
        self.stream_usage = True  # ask for usage in the last stream chunk until a server refuses stream_options
        # retries are ours (with accounting); the client's own are switched off. The client is thread-safe.
        self.client = OpenAI(base_url=base_url, api_key=key or "not-needed", timeout=timeout_s, max_retries=0)

    @property
    def where(self) -> str:
        return self.base_url or "api.openai.com"

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
        kwargs: dict = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": self.seed if seed is None else seed,
        }
        if json_schema is not None:
            kwargs["response_format"] = self._response_format(json_schema)
        if tools is not None:
            kwargs.update(tools=tools, tool_choice=tool_choice or "auto")
        streamed = on_token is not None and tools is None
        if streamed:
            kwargs["stream"] = True
            if self.stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
        out = self._create_fitted(kwargs, json_schema)
        return self._streamed(out, on_token, cancelled) if streamed and on_token is not None else self._reply(out)

    def _create_fitted(self, kwargs: dict, json_schema: dict | None):
        """`_create`, and after a refusal of the prompt as longer than the server's context, again with the longest
        message shortened by the reported overflow (tokens estimated at the prompt's characters a token). A count
        that does not fall after shortening means the server's own generation overflows (llama-cpp-python's
        function-calling format writes a tool call's arguments past max_tokens, then counts them as prompt)."""
        reported = None
        for attempt in range(FIT_ATTEMPTS):
            try:
                return self._create(kwargs, json_schema)
            except ContextOverflowError as exc:
                messages, max_tokens = kwargs["messages"], kwargs["max_tokens"]
                if reported is not None and exc.prompt_tokens >= reported:
                    raise LLMError(
                        f"the LLM server at {self.where} overflows its context ({exc.context_tokens} "
                        f"tokens) with the prompt shortened too ({reported}, then {exc.prompt_tokens} "
                        "tokens counted): the overflow is in what it generates, not in the prompt: "
                        f"{exc}"
                    ) from None
                reported = exc.prompt_tokens
                chars_a_token = sum(len(m["content"]) for m in messages) / max(exc.prompt_tokens, 1)

                def count(text: str) -> int:
                    return math.ceil(len(text) / max(chars_a_token, 1e-9))  # noqa: B023

                overflow = exc.prompt_tokens + max_tokens - exc.context_tokens + _MARGIN_TOKENS
                fitted = fit_messages(messages, counted_tokens(messages, count) - overflow, count)
                if attempt == FIT_ATTEMPTS - 1 or fitted == messages:
                    raise LLMError(
                        f"the prompt does not fit the context of the LLM server at {self.where} "
                        f"({exc.context_tokens} tokens) with {max_tokens} tokens left for the reply: "
                        f"{exc}"
                    ) from None
                kwargs = {**kwargs, "messages": fitted}

    def _create(self, kwargs: dict, json_schema: dict | None):
        import openai

        try:
            return self.client.chat.completions.create(**kwargs)
        except json.JSONDecodeError:  # declared JSON, but is not
            raise TransientLLMError(
                f"misbehaving server at {self.where}: HTTP 200 with a body that is not JSON"
            ) from None
        except (openai.APIStatusError, openai.APIConnectionError) as exc:
            if json_schema is not None and self.response_format == "json_schema" and "json_object" in str(exc):
                # the server (e.g. llama.cpp's) knows only json_object + schema: switch once and for all
                self.response_format = "json_object"
                return self._create({**kwargs, "response_format": self._response_format(json_schema)}, json_schema)
            if "stream_options" in kwargs and "stream_options" in str(exc):
                self.stream_usage = False
                return self._create({k: v for k, v in kwargs.items() if k != "stream_options"}, json_schema)
            error = openai_client_error(exc, self.where, self.timeout_s)
            assert error is not None  # the client's HTTP and connection errors all have one
            raise error from None

    def _reply(self, out) -> Reply:
        choices = _choices(out, self.where)
        message = getattr(choices[0], "message", None)
        if message is None:
            raise TransientLLMError(f"misbehaving server at {self.where}: a choice without a message")
        usage = getattr(out, "usage", None)
        return Reply(
            message.content or "",
            getattr(usage, "prompt_tokens", 0) or 0,
            getattr(usage, "completion_tokens", 0) or 0,
            openai_tool_calls(getattr(message, "tool_calls", None)),
        )

    def _streamed(self, stream, on_token: TokenSink, cancelled: threading.Event | None) -> Reply:
        parts: list[str] = []
        usage, chunks = None, 0
        try:
            for chunk in stream:
                chunks += 1
                if cancelled is not None and cancelled.is_set():
                    raise RunCancelled("the run was cancelled")
                usage = getattr(chunk, "usage", None) or usage
                if getattr(chunk, "choices", None) == [] and usage is not None:
                    continue  # the usage-only last chunk
                delta = getattr(_choices(chunk, self.where)[0], "delta", None)
                text = getattr(delta, "content", None) or ""
                if text:
                    parts.append(text)
                    on_token(text)
        except json.JSONDecodeError:
            raise TransientLLMError(f"misbehaving server at {self.where}: a stream event that is not JSON") from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if not chunks:
            raise TransientLLMError(f"misbehaving server at {self.where}: HTTP 200 without a chat-completion stream")
        if usage is None:  # the server ignores stream_options (llama.cpp's): one content chunk per token
            return Reply("".join(parts), 0, len(parts))
        return Reply(
            "".join(parts), getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0
        )

    def _response_format(self, schema: dict) -> dict:
        if self.response_format == "json_object":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


def _choices(out, where: str) -> list:
    """The reply's choices; anything else is a misbehaving server (HTTP 200 with a body that is not a completion)."""
    if isinstance(out, (str, bytes)):
        raise TransientLLMError(f"misbehaving server at {where}: HTTP 200 with a body that is not JSON")
    choices = getattr(out, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise TransientLLMError(f"misbehaving server at {where}: the reply has no 'choices'")
    return choices
