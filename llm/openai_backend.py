"""`OpenAIBackend`: the `openai` client against any OpenAI-compatible server (structured output via
`response_format=json_schema`; a reply that is not a chat completion is a misbehaving server, retried). Prompts are
fitted to the server's context window (`llm.context_window`, or what the server says) before they are sent, and a
prompt the server still refuses as too long is shortened and sent again (llm/fitting.py). A tool call whose
generation overflows the server's context (llama-cpp-python's function-calling format ignores max_tokens for a tool
call's arguments) is asked again as a JSON object naming the tool, which the server bounds by max_tokens."""

from __future__ import annotations

import functools
import json
import os
import threading

from switchyard.errors import LLMError, RunCancelled, TransientLLMError
from switchyard.llm.backend import Messages, Reply, openai_client_error, openai_tool_calls
from switchyard.llm.fitting import GenerationOverflow, PromptFitter, server_context_window
from switchyard.llm.prompts import TOOL_CALL_AS_JSON
from switchyard.run_context import TokenSink


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
        context_window: int | None = None,
    ):
        """`context_window`: the model's context in tokens; None = ask the server (llama.cpp `/props`, vLLM
        `/v1/models`) at the first call, and fit prompts only after a refusal when it does not say."""
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
        ask = functools.partial(server_context_window, base_url, model, key, min(timeout_s, 10.0)) if base_url else None
        self.fitter = PromptFitter(self.where, context_window, ask)

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

        def request(fitted: Messages):
            out = self._create({**kwargs, "messages": fitted}, json_schema)
            counted = 0 if streamed else getattr(getattr(out, "usage", None), "prompt_tokens", 0)
            if isinstance(counted, int) and counted > 0:
                self.fitter.learn(fitted, tools, counted)
            return out

        try:
            out = self.fitter.send(messages, max_tokens, tools, request)
        except GenerationOverflow:
            if tools is None:
                raise
            return self._tool_call_as_json(messages, tools, max_tokens, temperature, kwargs["seed"])
        return self._streamed(out, on_token, cancelled) if streamed and on_token is not None else self._reply(out)

    def _tool_call_as_json(
        self, messages: Messages, tools: list[dict], max_tokens: int, temperature: float, seed: int
    ) -> Reply:
        """One tool call asked as a JSON object `{"name", "arguments"}` under a schema of the tools (no tools sent,
        so the server bounds the reply by max_tokens); a reply that does not parse is text for the caller's repair."""
        schema = {"anyOf": [_call_schema(tool) for tool in tools]}
        listed = "; ".join(f"{t['function']['name']}: {t['function'].get('description', '')}" for t in tools)
        first, rest = messages[0], messages[1:]
        note = TOOL_CALL_AS_JSON.format(tools=listed)
        asked = (
            [{**first, "content": first["content"] + note}, *rest]
            if first["role"] == "system"
            else [{"role": "system", "content": note.strip()}, *messages]
        )
        kwargs = {
            "model": self.model,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": seed,
            "response_format": self._response_format(schema),
        }
        reply = self._reply(
            self.fitter.send(asked, max_tokens, None, lambda m: self._create({**kwargs, "messages": m}, schema))
        )
        try:
            call = json.loads(reply.text)
        except json.JSONDecodeError:
            return reply
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
            reply.text, reply.tool_calls = "", [{"name": call["name"], "arguments": json.dumps(arguments)}]
        return reply

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


def _call_schema(tool: dict) -> dict:
    function = tool["function"]
    parameters = function.get("parameters") or {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": parameters},
        "required": ["name", "arguments"],
    }


def _choices(out, where: str) -> list:
    """The reply's choices; anything else is a misbehaving server (HTTP 200 with a body that is not a completion)."""
    if isinstance(out, (str, bytes)):
        raise TransientLLMError(f"misbehaving server at {where}: HTTP 200 with a body that is not JSON")
    choices = getattr(out, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise TransientLLMError(f"misbehaving server at {where}: the reply has no 'choices'")
    return choices
