"""Prompts that fit the context window of a model behind a server (the `openai` and `langchain` backends; the local
backend counts with the model's own tokenizer, llm/llamacpp.py).

The window comes from `llm.context_window`, or from what the model or its server says (llama.cpp's llama-server:
`/props`; vLLM: `max_model_len` in `/v1/models`; a LangChain model's profile), asked once. A prompt is counted in
characters at a rate learned from the server's own usage reports (`DEFAULT_CHARS_A_TOKEN` until the first reply) and
fitted before it is sent (`fit_messages`: lowest-ranked passages dropped first, earlier agent steps summarised,
tool schemas counted). A prompt the server still refuses as too long is shortened by the overflow it reported and
sent again; a count that does not fall is the server's own generation overflowing (`GenerationOverflow`)."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable
from typing import TypeVar

from switchyard.errors import ContextOverflowError, LLMError
from switchyard.llm.backend import MESSAGE_OVERHEAD_TOKENS, Messages, counted_tokens, fit_messages

FIT_ATTEMPTS = 3  # requests a call may send: the prompt as given, then shortened by what each refusal said
DEFAULT_CHARS_A_TOKEN = 3.0  # before any usage report: below English's ~4, so a first estimate errs short
_MARGIN_TOKENS = 16  # kept free past the estimate, as token estimates from characters are rough
T = TypeVar("T")
log = logging.getLogger(__name__)


class GenerationOverflow(LLMError):
    """The server overflows its context with what it generates (llama-cpp-python's function-calling format writes a
    tool call's arguments past max_tokens), not with the prompt: shortening the prompt does not help."""


def server_context_window(base_url: str, model: str, api_key: str | None, timeout_s: float) -> int | None:
    """The context window an OpenAI-compatible server reports, None when it says nothing: vLLM lists
    `max_model_len` for each model in `/v1/models`; llama.cpp's llama-server gives its slots' context in `/props`
    (beside `/v1`) as `default_generation_settings.n_ctx`. Any failure to ask is None (the overflow retry remains)."""
    import urllib.request

    root = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    server_root = root[: -len("/v1")] if root.endswith("/v1") else root
    for url, read in ((f"{root}/models", _max_model_len(model)), (f"{server_root}/props", _props_n_ctx)):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s) as reply:
                window = read(json.loads(reply.read()))
        except (OSError, ValueError) as exc:  # HTTP errors (404 where a server has no such route), no server, not JSON
            log.debug("asking %s for its context window: %s", url, exc)
            continue
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            return window
    return None


def _max_model_len(model: str) -> Callable[[object], object]:
    def read(body: object) -> object:
        listed = body.get("data") if isinstance(body, dict) else None
        if not isinstance(listed, list):
            return None
        entries = [e for e in listed if isinstance(e, dict)]
        named = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
        return named[0].get("max_model_len") if named else None

    return read


def _props_n_ctx(body: object) -> object:
    settings = body.get("default_generation_settings") if isinstance(body, dict) else None
    return settings.get("n_ctx") if isinstance(settings, dict) else None


class PromptFitter:
    """Fits one backend's prompts to its context window: `fitted` before sending, `send` to send with the overflow
    retry. Thread-safe: the window is asked once under a lock; the learned rate is one float, replaced whole."""

    def __init__(self, where: str, context_window: int | None = None, ask: Callable[[], int | None] | None = None):
        self.where = where
        self._window, self._ask = context_window, ask
        self._asked = context_window is not None or ask is None
        self._lock = threading.Lock()
        self.chars_a_token = DEFAULT_CHARS_A_TOKEN

    @property
    def context_window(self) -> int | None:
        if not self._asked:
            with self._lock:
                if not self._asked:
                    assert self._ask is not None  # _asked is set when there is nothing to ask
                    self._window = self._ask()
                    self._asked = True
        return self._window

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_a_token)

    def learn(self, messages: Messages, tools: list[dict] | None, prompt_tokens: int) -> None:
        """Take the server's count of a prompt it read as the rate for the next estimates."""
        chars = sum(len(m["content"]) for m in messages) + (len(json.dumps(tools)) if tools else 0)
        content_tokens = prompt_tokens - MESSAGE_OVERHEAD_TOKENS * len(messages)
        if chars > 0 and content_tokens > 0:
            self.chars_a_token = max(1.0, chars / content_tokens)

    def estimate(self, messages: Messages, tools: list[dict] | None) -> int:
        """The prompt's tokens as estimated at the learned rate, the tools' schemas included."""
        return counted_tokens(messages, self.count) + (self.count(json.dumps(tools)) if tools else 0)

    def fitted(self, messages: Messages, max_tokens: int, tools: list[dict] | None) -> Messages:
        """The messages fitted to the window with room for `max_tokens` and the tools' schemas; unchanged when the
        window is unknown."""
        window = self.context_window
        if window is None:
            return messages
        budget = window - max_tokens - _MARGIN_TOKENS - (self.count(json.dumps(tools)) if tools else 0)
        return fit_messages(messages, budget, self.count)

    def send(
        self, messages: Messages, max_tokens: int, tools: list[dict] | None, request: Callable[[Messages], T]
    ) -> T:
        """`request(messages)` with the prompt fitted; after a refusal of the prompt as longer than the server's
        context (`ContextOverflowError`), again with it shortened by the reported overflow (tokens estimated at the
        refused prompt's characters a token). A count that does not fall after shortening, or one over twice the estimate
        of a prompt with tools, is `GenerationOverflow`."""
        messages = self.fitted(messages, max_tokens, tools)
        reported = None
        for attempt in range(FIT_ATTEMPTS):
            try:
                return request(messages)
            except ContextOverflowError as exc:
                estimate = self.estimate(messages, tools)
                if tools and exc.prompt_tokens > 2 * estimate + _MARGIN_TOKENS:
                    raise GenerationOverflow(
                        f"the LLM server at {self.where} counts {exc.prompt_tokens} tokens for a prompt of about "
                        f"{estimate}: it overflows its context ({exc.context_tokens} tokens) with the tool call it "
                        f"generates, not with the prompt: {exc}"
                    ) from None
                if reported is not None and exc.prompt_tokens >= reported:
                    raise GenerationOverflow(
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
                messages = fitted
        raise AssertionError("unreachable: the last attempt returns or raises")
