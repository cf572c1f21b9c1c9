"""The LLM interface every node uses (`LLM`), over any `ChatBackend`.

`LLM` adds what every caller needs: retries with exponential backoff on transient errors, per-run accounting (each
reply's usage goes to the meters of the run that made the call, see package/run_context.py), the run's seed and
cancellation, optional token streaming, and pydantic validation of structured replies with one repair round and
then a deterministic fallback, so a malformed reply never crashes a query. An unreachable server becomes one clear
`LLMError`.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Generic, TypeVar

from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError

from switchyard import tracing
from switchyard.errors import LLMError, RunCancelled, TransientLLMError
from switchyard.llm.backend import ChatBackend, Messages, Reply
from switchyard.llm.prompts import STRUCTURED_REPAIR
from switchyard.run_context import RunContext, TokenSink

T = TypeVar("T", bound=BaseModel)


@dataclass
class StructuredResult(Generic[T]):
    value: T
    status: str  # "ok" | "repaired" | "fallback"
    raw: str = ""
    error: str = ""


class LLM:
    """The interface nodes use: `generate(messages)`, `structured(messages, Model, fallback)` and `call_tools`. Safe
    to share between runs in flight: it holds no per-run state. Each call takes the run it belongs to (`run=`, the
    run's `RunContext`): its seed and cancellation apply, and its usage goes to the run's open meters. Without a
    run, the backend's configured seed applies and nothing is counted."""

    def __init__(
        self,
        backend: ChatBackend,
        temperature: float = 0.0,
        max_tokens: int = 256,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        model: str = "",
    ):
        if max_retries < 0 or max_tokens < 1:
            raise ValueError("max_retries >= 0 and max_tokens >= 1")
        self.backend = backend
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.model = model or backend.name  # named in trace spans

    def warm_up(self) -> None:
        warm_up = getattr(self.backend, "warm_up", None)
        if warm_up is not None:
            warm_up()

    def _call(
        self,
        messages: Messages,
        max_tokens: int | None,
        json_schema: dict | None,
        run: RunContext | None,
        on_token: TokenSink | None = None,
        **tool_options,
    ) -> Reply:
        max_tokens = max_tokens or self.max_tokens
        attributes = {
            tracing.SPAN_KIND: "LLM",
            "llm.model_name": self.model,
            "llm.provider": self.backend.name,
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.backend.name,
            "gen_ai.request.model": self.model,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.temperature": self.temperature,
            "switchyard.llm.structured": json_schema is not None,
            "switchyard.llm.tools": bool(tool_options.get("tools")),
        }
        with tracing.span(f"chat {self.model}", attributes, kind=SpanKind.CLIENT) as span:
            reply, ms = self._attempts(messages, max_tokens, json_schema, run, on_token, span, **tool_options)
            if span.is_recording():
                span.set_attributes(
                    {
                        "llm.token_count.prompt": reply.prompt_tokens,
                        "llm.token_count.completion": reply.completion_tokens,
                        "llm.token_count.total": reply.prompt_tokens + reply.completion_tokens,
                        "gen_ai.usage.input_tokens": reply.prompt_tokens,
                        "gen_ai.usage.output_tokens": reply.completion_tokens,
                        "switchyard.llm.latency_ms": round(ms, 2),
                        "switchyard.llm.cache_hit": reply.cached,
                    }
                )
        return reply

    def _attempts(
        self,
        messages: Messages,
        max_tokens: int,
        json_schema: dict | None,
        run: RunContext | None,
        on_token: TokenSink | None,
        span,
        **tool_options,
    ) -> tuple[Reply, float]:
        """The reply and the milliseconds the backend took for it, retrying transient errors."""
        cancelled, seed = (run.cancelled, run.seed) if run is not None else (None, None)
        for attempt in range(self.max_retries + 1):
            if cancelled is not None and cancelled.is_set():
                raise RunCancelled("the run was cancelled")
            started = time.perf_counter()
            try:
                reply = self.backend.chat(
                    messages,
                    max_tokens=max_tokens,
                    temperature=self.temperature,
                    json_schema=json_schema,
                    seed=seed,
                    on_token=on_token,
                    cancelled=cancelled,
                    **tool_options,
                )
            except TransientLLMError as exc:
                if run is not None:
                    run.record_time((time.perf_counter() - started) * 1e3)
                span.add_event("retry", {"attempt": attempt + 1, "error": str(exc)[:200]})
                if attempt == self.max_retries:
                    where = getattr(self.backend, "base_url", None) or self.backend.name
                    raise LLMError(f"LLM backend {where} failed after {attempt + 1} tries ({exc})") from None
                time.sleep(self.backoff_s * 2**attempt)
                continue
            ms = (time.perf_counter() - started) * 1e3
            if run is not None:
                run.record_call(reply.prompt_tokens, reply.completion_tokens, ms, cached=reply.cached)
            if cancelled is not None and cancelled.is_set():
                raise RunCancelled("the run was cancelled")
            return reply, ms
        raise AssertionError("unreachable")

    def generate(
        self,
        messages: Messages,
        max_tokens: int | None = None,
        on_token: TokenSink | None = None,
        run: RunContext | None = None,
    ) -> str:
        """Free text. With `on_token`, the text is also sent piece by piece as it is generated."""
        return self._call(messages, max_tokens, None, run, on_token).text.strip()

    def call_tools(
        self,
        messages: Messages,
        tools: list[dict],
        tool_choice: str | dict = "auto",
        max_tokens: int | None = None,
        run: RunContext | None = None,
    ) -> Reply:
        """One reply to a request offering `tools` (function_tool definitions): its text and its tool calls."""
        return self._call(messages, max_tokens, None, run, tools=tools, tool_choice=tool_choice)

    def structured(
        self,
        messages: Messages,
        model: type[T],
        fallback: T,
        max_tokens: int | None = None,
        run: RunContext | None = None,
    ) -> StructuredResult[T]:
        schema = model.model_json_schema()
        raw = self._call(messages, max_tokens, schema, run).text
        value, error = _parse(raw, model)
        if value is not None:
            return StructuredResult(value, "ok", raw)
        repair = messages + [
            {"role": "assistant", "content": raw},
            {"role": "user", "content": STRUCTURED_REPAIR.format(error=error, schema=json.dumps(schema))},
        ]
        raw2 = self._call(repair, max_tokens, schema, run).text
        value, error2 = _parse(raw2, model)
        if value is not None:
            if run is not None:
                run.record_repair()
            return StructuredResult(value, "repaired", raw2, error)
        if run is not None:
            run.record_parse_fallback()
        return StructuredResult(fallback, "fallback", raw2, error2)


def judge_passages(
    llm: LLM,
    instruction: str,
    question: str,
    texts: list[str],
    model: type[T],
    fallback: T,
    max_tokens: int = 24,
    run: RunContext | None = None,
) -> list[T]:
    """One structured judgement per passage (relevance grading, LLM reranking): `instruction` is the system prompt."""
    return [
        llm.structured(
            [
                {"role": "system", "content": instruction},
                {"role": "user", "content": f"Question: {question}\nPassage: {text}"},
            ],
            model,
            fallback=fallback,
            max_tokens=max_tokens,
            run=run,
        ).value
        for text in texts
    ]


def _parse(raw: str, model: type[T]) -> tuple[T | None, str]:
    text = raw.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object"
    try:
        return model.model_validate(json.loads(text[start : end + 1])), ""
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg}"
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, f"{'.'.join(map(str, first['loc'])) or 'value'}: {first['msg']}"
