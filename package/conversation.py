"""The turns of a conversation: one typed `Message` for every caller, and the conversions into it.

A conversation reaches the pipeline as its earlier turns (`history`) beside the new question. Callers hold them in
their own shape: OpenAI-style dicts (`{"role": "user", "content": "..."}`, what chat UIs send), LangChain messages
(`HumanMessage`, `AIMessage`), or MTRAG's `{"speaker": "user" | "agent", "text": ...}`. `as_history` turns any of
them into `Message`s and refuses what does not parse with one `HistoryError` line. System and tool messages are
dropped: they carry no turn of the conversation (a chat UI's own system prompt is not a question).

    history = as_history([{"role": "user", "content": "Who patented the knuckle coupler?"},
                          {"role": "assistant", "content": "Eli Janney [1]"}])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from switchyard.errors import HistoryError

Role = Literal["user", "assistant"]
# every spelling of a role a caller may send -> ours; None: a message that is not a turn (dropped)
_ROLES: dict[str, Role | None] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "agent": "assistant",
    "system": None,
    "developer": None,
    "tool": None,
    "function": None,
}
MAX_MESSAGES = 200  # a longer history is refused: nobody's conversation, somebody's mistake or attack


class Message(BaseModel):
    """One turn of a conversation: who said it, and what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    content: str = Field(min_length=1)


def _text(content: Any) -> str | None:
    """A message's text: a string, or OpenAI's list of content parts (the text parts, joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        texts = [p for p in parts if isinstance(p, str)]
        if len(texts) == len(parts):
            return "\n".join(texts)
    return None


def _one(item: Any, index: int) -> Message | None:
    if isinstance(item, Message):
        return item
    if isinstance(item, dict):
        role = item.get("role", item.get("speaker", item.get("type")))
        content = item.get("content", item.get("text"))
    elif hasattr(item, "type") and hasattr(item, "content"):  # a LangChain message, not imported here
        role, content = item.type, item.content
    else:
        raise HistoryError(f"history message {index} is not a message object (got {type(item).__name__})")
    if not isinstance(role, str) or role.lower() not in _ROLES:
        raise HistoryError(
            f"history message {index} has an unknown role {role!r} (use user or assistant; system and tool "
            "messages are ignored)"
        )
    ours = _ROLES[role.lower()]
    if ours is None:
        return None
    text = _text(content)
    if text is None:
        raise HistoryError(f"history message {index} has no text content")
    text = text.strip()
    if not text:
        raise HistoryError(f"history message {index} ({ours}) is empty")
    return Message(role=ours, content=text)


def as_history(messages: Iterable[Any] | None) -> list[Message]:
    """The turns of `messages` (Message, dicts in OpenAI or MTRAG form, LangChain messages) as `Message`s, oldest
    first; system/tool messages dropped. `HistoryError` for anything else."""
    if messages is None:
        return []
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Iterable):
        raise HistoryError("history must be a list of messages")
    items = list(messages)
    if len(items) > MAX_MESSAGES:
        raise HistoryError(f"history has {len(items)} messages; at most {MAX_MESSAGES} are taken")
    return [m for i, item in enumerate(items) if (m := _one(item, i)) is not None]


def split_last_question(messages: Iterable[Any]) -> tuple[list[Message], str]:
    """A whole message list (a chat client's request) as (earlier turns, the last user message). `HistoryError`
    when the list holds no user message or ends with an assistant's. A chat client sends its whole conversation every
    time: past `MAX_MESSAGES` messages only the newest are taken (a long chat goes on, as a thread keeps its newest
    turns), where a `history` that long is refused."""
    if isinstance(messages, Iterable) and not isinstance(messages, (str, bytes, dict)):
        messages = list(messages)[-MAX_MESSAGES:]
        if messages and _blank_question(messages[-1]):
            raise HistoryError("the question is empty")
    turns = as_history(messages)
    if not turns or turns[-1].role != "user":
        raise HistoryError("the messages must end with a user message (the question)")
    return turns[:-1], turns[-1].content


def _blank_question(item: Any) -> bool:
    """A last message that is the user's, with no text: an empty question, not a malformed history."""
    role, content = (item.get("role"), item.get("content")) if isinstance(item, dict) else (None, None)
    return role == "user" and isinstance(content, str) and not content.strip()


def as_dicts(history: Sequence[Message]) -> list[dict[str, str]]:
    """OpenAI-style dicts, as a JSON body, the trace or a history file hold them."""
    return [m.model_dump() for m in history]
