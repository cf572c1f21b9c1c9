"""`llm.backend: langchain`: any LangChain chat model answers Switchyard's LLM calls.

The model is built with keyword arguments from a `provider:model` string by LangChain's `init_chat_model`
(`openai:gpt-4o-mini`, `anthropic:claude-sonnet-4-5`, `ollama:llama3`, ...) or from the import path of a chat model
class (`langchain_openai.ChatOpenAI` with a `base_url`, any `BaseChatModel`), or handed over as the object a user
already has (`LangChainBackend(model)`). Structured
replies use the model's own `with_structured_output` (`function_calling` by default: a forced tool call, which
llama.cpp's server decodes under a grammar built from the schema); streamed replies use `model.stream`. The
request's sampling parameters (max_tokens, temperature, seed) are set on a per-call copy of the model for those the
class declares, so concurrent calls never share mutable settings. Usage comes from LangChain's `usage_metadata`.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import threading

from switchyard.configs.schema import StructuredMethod
from switchyard.errors import LLMError, RunCancelled, TransientLLMError
from switchyard.extras import needs_extra
from switchyard.llm.backend import Messages, Reply, openai_client_error
from switchyard.llm.fitting import PromptFitter, server_context_window
from switchyard.run_context import TokenSink

SECRET_OR_PLACE = re.compile(r"key|token|secret|password|url|endpoint|host|port|timeout|retries|client", re.I)


def is_provider_model(spec: str) -> bool:
    """`provider:model` (init_chat_model's providers are plain names: openai, anthropic, google_genai, ollama, ...),
    not `package.module:Class`, whose module part is dotted."""
    provider, sep, model = spec.partition(":")
    return bool(sep and provider and model) and "." not in provider


def load_chat_model_class(path: str):
    """`package.module.Class` or `package.module:Class` -> the class; a clear `LLMError` otherwise."""
    module_name, sep, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not sep or not module_name or not attr:
        raise LLMError(
            f"llm.chat_model {path!r} is not an import path like langchain_openai.ChatOpenAI nor a "
            f"provider:model string like openai:gpt-4o-mini"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise LLMError(f"llm.chat_model {path!r}: cannot import {module_name} ({exc})") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise LLMError(f"llm.chat_model {path!r}: {module_name} has no {attr}")
    return cls


def build_chat_model(spec: str, kwargs: dict):
    """The chat model for `llm.chat_model` (a `provider:model` string or an import path) and its keyword arguments;
    a clear `LLMError` when it cannot be built."""
    if is_provider_model(spec):
        with needs_extra("langchain", f"llm.chat_model {spec!r}"):
            from langchain.chat_models import init_chat_model

        make = functools.partial(init_chat_model, spec)
    else:
        make = load_chat_model_class(spec)
    try:
        return make(**kwargs)
    except Exception as exc:  # bad or missing arguments, no credentials, an unknown provider or its package missing
        raise LLMError(
            f"cannot build {spec}({', '.join(sorted(kwargs))}): {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        ) from None


def chat_model_identity(spec: str, kwargs: dict) -> dict:
    """What names a LangChain model for the reply cache: its class (or provider:model string), its model name and
    the settings that change its replies (secrets, addresses, timeouts and retries are left out)."""
    named = spec.partition(":")[2] if is_provider_model(spec) else spec
    model = kwargs.get("model") or kwargs.get("model_name") or kwargs.get("model_id") or named
    settings = {
        k: v
        for k, v in sorted(kwargs.items())
        if k not in ("model", "model_name", "model_id") and not SECRET_OR_PLACE.search(k)
    }
    return {"backend": "langchain", "model": str(model), "chat_model": spec, "settings": settings}


class LangChainBackend:
    name = "langchain"

    def __init__(
        self, model, structured_method: StructuredMethod = "function_calling", context_window: int | None = None
    ):
        from langchain_core.language_models import BaseChatModel

        if not isinstance(model, BaseChatModel):
            raise LLMError(f"llm.backend=langchain needs a LangChain chat model, not {type(model).__name__}")
        self.model = model
        self.structured_method = structured_method
        self.base_url = getattr(model, "openai_api_base", None) or getattr(model, "base_url", None)
        self.timeout_s = getattr(model, "request_timeout", None)
        profile = getattr(model, "profile", None) or {}
        if context_window is None and isinstance(profile.get("max_input_tokens"), int):
            context_window = profile["max_input_tokens"]
        self.fitter = PromptFitter(self.where, context_window, self._ask_server() if context_window is None else None)

    def _ask_server(self):
        """How to ask the model's OpenAI-compatible server for its context window, when the model has one."""
        if not isinstance(self.base_url, str) or not self.base_url.startswith("http"):
            return None
        key = getattr(self.model, "openai_api_key", None)
        secret = key.get_secret_value() if hasattr(key, "get_secret_value") else os.environ.get("OPENAI_API_KEY")
        name = str(getattr(self.model, "model_name", None) or getattr(self.model, "model", None) or "")
        timeout = min(float(self.timeout_s), 10.0) if isinstance(self.timeout_s, (int, float)) else 10.0
        return functools.partial(server_context_window, self.base_url, name, secret, timeout)

    @classmethod
    def from_spec(
        cls,
        spec: str,
        kwargs: dict,
        structured_method: StructuredMethod = "function_calling",
        context_window: int | None = None,
    ) -> LangChainBackend:
        """From `llm.chat_model` (a `provider:model` string or an import path) and `llm.chat_model_kwargs`."""
        return cls(build_chat_model(spec, kwargs), structured_method, context_window)

    @property
    def where(self) -> str:
        return str(self.base_url or type(self.model).__name__)

    def _for_call(self, max_tokens: int, temperature: float, seed: int | None, stream: bool):
        fields = type(self.model).model_fields
        wanted = {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": seed,
            "stream_usage": True if stream else None,
        }
        update = {k: v for k, v in wanted.items() if v is not None and k in fields}
        return self.model.model_copy(update=update) if update else self.model

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
        from langchain_core.messages import convert_to_messages

        plain = json_schema is None and tools is None
        model = self._for_call(max_tokens, temperature, seed, stream=on_token is not None and plain)

        def request(fitted: Messages) -> Reply:
            reply = self._invoke(
                model, convert_to_messages(fitted), json_schema, on_token, cancelled, tools, tool_choice
            )
            if reply.prompt_tokens:
                self.fitter.learn(fitted, tools, reply.prompt_tokens)
            return reply

        return self.fitter.send(messages, max_tokens, tools, request)

    def _invoke(self, model, lc_messages, json_schema, on_token, cancelled, tools, tool_choice) -> Reply:
        try:
            if tools is not None:
                message = model.bind_tools(tools, tool_choice=tool_choice).invoke(lc_messages)
                return _reply(_text(message), message, None)
            if json_schema is not None:
                return self._structured(model, lc_messages, json_schema)
            if on_token is not None:  # like the openai backend: otherwise cancellation is checked between calls
                return self._streamed(model, lc_messages, on_token, cancelled)
            message = model.invoke(lc_messages)
            return _reply(_text(message), message, None)
        except (LLMError, TransientLLMError, RunCancelled):
            raise
        except Exception as exc:
            raise self._error(exc) from None

    def _structured(self, model, lc_messages, json_schema: dict) -> Reply:
        schema = {"title": "reply", "description": "the reply", **json_schema}
        runnable = model.with_structured_output(schema, method=self.structured_method, include_raw=True)
        out = runnable.invoke(lc_messages)
        raw, parsed = out.get("raw"), out.get("parsed")
        if parsed is not None:
            text = json.dumps(parsed)
        elif getattr(raw, "tool_calls", None):  # a call whose arguments did not parse: the validator repairs it
            text = json.dumps(raw.tool_calls[0].get("args", {}))
        else:
            text = _text(raw) if raw is not None else ""
        reply = _reply(text, raw, None)
        reply.tool_calls = []  # the forced call is the structured reply itself
        return reply

    def _streamed(self, model, lc_messages, on_token: TokenSink, cancelled: threading.Event | None) -> Reply:
        parts: list[str] = []
        merged = None
        for chunk in model.stream(lc_messages):
            if cancelled is not None and cancelled.is_set():
                raise RunCancelled("the run was cancelled")
            merged = chunk if merged is None else merged + chunk
            text = _text(chunk)
            if text:
                parts.append(text)
                on_token(text)
        return _reply("".join(parts), merged, len(parts))

    def _error(self, exc: Exception) -> Exception:
        try:
            mapped = openai_client_error(exc, self.where, self.timeout_s)
        except ImportError:
            mapped = None
        if mapped is not None:
            return mapped
        if isinstance(exc, (TimeoutError, ConnectionError)):
            return TransientLLMError(f"{type(exc).__name__}: {exc}")
        return LLMError(f"LangChain model {type(self.model).__name__} failed: {type(exc).__name__}: {exc}")


def _text(message) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def _reply(text: str, message, chunks: int | None) -> Reply:
    """The reply with the message's usage; a stream without usage (llama.cpp's server ignores stream_options)
    counts one completion token per content chunk, as the openai backend does."""
    usage = getattr(message, "usage_metadata", None) or {}
    if not usage and chunks is not None:
        return Reply(text, 0, chunks)
    return Reply(text, usage.get("input_tokens", 0) or 0, usage.get("output_tokens", 0) or 0, _tool_calls(message))


def _tool_calls(message) -> list[dict]:
    """LangChain's parsed tool calls (arguments back to JSON text) and the ones whose arguments did not parse."""
    calls = [
        {"name": c.get("name") or "", "arguments": json.dumps(c.get("args") or {})}
        for c in getattr(message, "tool_calls", None) or []
    ]
    return calls + [
        {"name": c.get("name") or "", "arguments": c.get("args") or ""}
        for c in getattr(message, "invalid_tool_calls", None) or []
    ]
