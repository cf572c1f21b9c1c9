"""The contract between the LLM interface (llm/client.py) and what answers its calls: the `ChatBackend` protocol,
the `Reply` it returns and the errors it raises. Backends and wrappers of backends (llm/cache.py) import this
module, not llm/client.py, so the interface can build them without an import cycle."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from switchyard.errors import ContextOverflowError, LLMError, TransientLLMError
from switchyard.run_context import TokenSink

if TYPE_CHECKING:
    import openai

Messages = list[dict[str, str]]
MESSAGE_OVERHEAD_TOKENS = 6  # a chat template's role markers around each message
# how servers say a prompt overflows their context, with the token counts they report
_OVERFLOWS = (
    # OpenAI, vLLM and llama-cpp-python's server
    re.compile(
        r"maximum context length is (?P<context>\d+) tokens.*?(?:(?P<prompt>\d+) in the messages|"
        r"messages resulted in (?P<prompt2>\d+) tokens)",
        re.S,
    ),
    # llama.cpp's llama-server
    re.compile(r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<context>\d+) tokens\)"),
)


@dataclass
class Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # native tool calls, in order: {"name": ..., "arguments": the JSON text the model wrote}
    tool_calls: list[dict] = field(default_factory=list)
    cached: bool = field(default=False, compare=False)  # answered from the reply cache (llm/cache.py); not stored


class ChatBackend(Protocol):
    """`tools` (OpenAI-format function definitions) and `tool_choice` ("auto", "required" or a forced
    {"type": "function", ...}) are passed only by callers that use native tool calling."""

    name: str

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
    ) -> Reply: ...


def function_tool(name: str, description: str, parameters: dict) -> dict:
    """A tool definition in the OpenAI format every backend takes (llama-cpp-python, OpenAI servers, LangChain)."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def openai_tool_calls(calls) -> list[dict]:
    """`Reply.tool_calls` from an OpenAI-format message's `tool_calls` (objects or dicts)."""
    out = []
    for call in calls or []:
        function = call.get("function") if isinstance(call, dict) else getattr(call, "function", None)
        get = (lambda k: function.get(k)) if isinstance(function, dict) else (lambda k: getattr(function, k, None))  # noqa: B023
        if function is not None:
            out.append({"name": get("name") or "", "arguments": get("arguments") or ""})
    return out


def send_words(text: str, on_token: TokenSink) -> None:
    """Stream a finished reply word by word (with its trailing whitespace), as a backend that generates it would."""
    for word in re.findall(r"\s*\S+\s*", text) if text.strip() else []:
        on_token(word)


def first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else ""


def openai_client_error(exc: Exception, where: str, timeout_s: float | None) -> Exception | None:
    """The error to raise for an exception of the `openai` client (used directly or inside a LangChain model):
    timeouts, dropped connections, 429 and 5xx are transient, any other HTTP error is an `LLMError`. None when
    `exc` is not the client's."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return TransientLLMError(f"timed out after {timeout_s}s")
    if isinstance(exc, openai.APIConnectionError):
        return TransientLLMError(f"unreachable: {type(exc).__name__}")
    if isinstance(exc, (openai.RateLimitError, openai.InternalServerError)):
        return TransientLLMError(f"HTTP {exc.status_code}: {first_line(exc.message)}")
    if isinstance(exc, openai.APIStatusError):
        refused = f"LLM server at {where} refused the request (HTTP {exc.status_code}): {first_line(exc.message)}"
        overflow = _context_overflow(exc) if exc.status_code == 400 else None
        return LLMError(refused) if overflow is None else ContextOverflowError(refused, *overflow)
    return None


def _context_overflow(exc: openai.APIStatusError) -> tuple[int, int] | None:
    """(context tokens, prompt tokens) when the client's error refuses a prompt longer than the server's context,
    with the counts the server reported (the client's message holds the body it got); None otherwise."""
    for pattern in _OVERFLOWS:
        match = pattern.search(str(exc.message))
        if match is not None:
            found = match.groupdict()
            return int(found["context"]), int(found["prompt"] or found.get("prompt2", ""))
    return None


def counted_tokens(messages: Messages, count_tokens: Callable[[str], int]) -> int:
    """A prompt's tokens by `count_tokens`, with each message's chat-template markers."""
    return sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


_PASSAGE_LINE = re.compile(r"^\[(\d+)\] ", re.M)  # a numbered passage, one a line (nodes/answer.py and the agents)
_STEP_START, _STEP_END = "Thought: ", "Observation: "  # an agent's earlier step (nodes/strategies/common.scratchpad)
_KEPT_TAIL_CHARS = 400  # a last line this short (the question) survives shortening


def fit_messages(messages: Messages, budget_tokens: int, count_tokens: Callable[[str], int]) -> Messages:
    """The messages shortened until the prompt's counted tokens fit `budget_tokens`, least needed first:
    1. numbered passages (`[n] ...` lines) are dropped, the highest number (the lowest-ranked) first, one kept;
    2. an agent's earlier steps (`Thought:` ... `Observation:` blocks) are summarised, oldest first, into one line
       naming their actions; the last step is kept whole;
    3. the longest message is cut before its last line (the question, when that line is short), its first 200
       characters always kept; then the next longest, while the prompt is still over.
    The caller's messages are not modified."""
    total = counted_tokens(messages, count_tokens)
    if total <= budget_tokens:
        return messages
    trimmed = [dict(m) for m in messages]
    for shorten in (_drop_passages, _summarise_steps, _cut_longest):
        total = shorten(trimmed, total, budget_tokens, count_tokens)
        if total <= budget_tokens:
            break
    return trimmed


def _drop_passages(messages: Messages, total: int, budget: int, count: Callable[[str], int]) -> int:
    while total > budget:
        numbered = [
            (int(m.group(1)), i, m.start())
            for i, message in enumerate(messages)
            if message["role"] != "assistant"
            for m in list(_PASSAGE_LINE.finditer(message["content"]))[1:]  # the first passage of each is kept
        ]
        if not numbered:
            break
        _, i, start = max(numbered)
        content = messages[i]["content"]
        end = content.find("\n", start)
        shorter = content[: start - 1] + (content[end:] if end >= 0 else "")  # the line and its newline
        total += count(shorter) - count(content)
        messages[i]["content"] = shorter
    return total


def _summarise_steps(messages: Messages, total: int, budget: int, count: Callable[[str], int]) -> int:
    for message in messages:
        if total <= budget or message["role"] == "assistant":
            continue
        lines = message["content"].split("\n")
        steps = _step_blocks(lines)
        for older in range(1, len(steps)):  # summarise steps[:older], the last step always kept whole
            first, last = steps[0][0], steps[older - 1][1]
            actions = [_action(lines[k]) for start, end in steps[:older] for k in range(start, end + 1)]
            summary = f"({older} earlier steps, observations left out: {', '.join(a for a in actions if a)})"
            shorter = "\n".join(lines[:first] + [summary] + lines[last + 1 :])
            if total + count(shorter) - count(message["content"]) <= budget or older == len(steps) - 1:
                total += count(shorter) - count(message["content"])
                message["content"] = shorter
                break
    return total


def _step_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, last line) of each `Thought:` ... `Observation:` block, in order."""
    blocks, start = [], None
    for k, line in enumerate(lines):
        if line.startswith(_STEP_START):
            start = k
        elif line.startswith(_STEP_END) and start is not None:
            blocks.append((start, k))
            start = None
    return blocks


def _action(line: str) -> str:
    return line[len("Action: ") :].split("(", 1)[0].strip() if line.startswith("Action: ") else ""


def _cut_longest(messages: Messages, total: int, budget: int, count: Callable[[str], int]) -> int:
    """The longest message cut (`_cut`), then, while the prompt is still over, the next longest, and so on: several
    long messages (a conversation's earlier turns) are all shortened, not only the first."""
    for longest in sorted(range(len(messages)), key=lambda i: -len(messages[i]["content"])):
        if total <= budget:
            break
        total = _cut(messages, longest, total, budget, count)
    return total


def _cut(messages: Messages, longest: int, total: int, budget: int, count: Callable[[str], int]) -> int:
    content = messages[longest]["content"]
    head, newline, last = content.rpartition("\n")
    tail = newline + last if newline and len(last) <= _KEPT_TAIL_CHARS and len(head) > 200 else ""
    head = content[: len(content) - len(tail)]
    tokens = count(content)
    while total > budget and len(head) > 200:
        cut = int((total - budget) * len(content) / max(tokens, 1)) + 16  # at this message's chars a token
        head = head[: max(len(head) - cut, 200)]
        content = head + tail
        shorter = count(content)
        total, tokens = total - tokens + shorter, shorter
    messages[longest]["content"] = content
    return total
