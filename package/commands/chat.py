"""A conversation on the command line: `chat` (an interactive loop, or one question per line from a pipe) and the
history file `ask --history FILE` / `search --history FILE` read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from switchyard.commands.common import load_config
from switchyard.errors import HistoryError, SwitchyardError, UsageError, first_line

HELP = "/reset starts a new conversation, /sources shows the last answer's passages, /quit (or Ctrl-D) ends"


def read_history(path: str) -> list:
    """The earlier turns in FILE (`-`: standard input): a JSON list of messages (`{"role", "content"}`), or one
    message a line (JSONL). `HistoryError` for anything else."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"cannot read the history file {path}: {exc.__class__.__name__}") from exc
    try:
        data = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x]
    except json.JSONDecodeError as exc:
        raise HistoryError(
            f"the history file {path} is not JSON (a list of {{role, content}} messages, or one a line): {exc.msg} "
            f"at line {exc.lineno}"
        ) from exc
    from switchyard.conversation import as_history

    return as_history(data)  # checked here, before any model loads


def cmd_chat(args) -> int:
    from switchyard.conversation import MAX_MESSAGES
    from switchyard.graphs.conversations import ConversationStore, conversations_path
    from switchyard.graphs.pipeline import Pipeline

    config = load_config(args)
    if config.graph.mode == "agent" and config.graph.router.approve:
        raise UsageError("chat runs unattended; this pipeline pauses for approval (use `ask`)")
    elsewhere = Path.home() / ".cache" / "switchyard"
    store = (
        ConversationStore.on_disk(conversations_path(config.store.uri, elsewhere), config.conversation.expire_s)
        if args.thread
        else None
    )
    pipe = Pipeline(config, conversations=store)
    interactive = sys.stdin.isatty() and not args.plain
    history: list = []
    last = None
    if interactive:
        print(f"Switchyard chat over {config.store.collection!r} ({HELP}).", file=sys.stderr)
    while True:
        try:
            line = input("you> " if interactive else "")
        except EOFError:
            break
        question = line.strip()
        if not question:
            continue
        if question in ("/quit", "/exit"):
            break
        if question == "/reset":
            history, last = [], None
            if args.thread:
                pipe.conversations.delete(args.thread)
            print("(a new conversation)", file=sys.stderr)
            continue
        if question == "/sources":
            _print_sources(last)
            continue
        if question.startswith("/"):
            print(f"unknown command {question.split()[0]} ({HELP})", file=sys.stderr)
            continue
        try:
            if args.thread:
                last = pipe.ask(question, where=args.where, thread_id=args.thread)
            else:
                last = pipe.ask(question, where=args.where, history=history)
        except SwitchyardError as exc:
            if not interactive:  # a script stops at the first failed question (exit code of the error)
                raise
            print(f"error: {first_line(exc)}", file=sys.stderr)  # a person asks again, the session goes on
            continue
        if not args.thread:
            history += [{"role": "user", "content": question}, {"role": "assistant", "content": last.answer}]
            history = history[-MAX_MESSAGES:]  # a long chat keeps its newest turns, as a thread does
        if args.json:
            print(json.dumps(last.to_json(), ensure_ascii=False), flush=True)
            continue
        text = last.short_answer or last.answer
        print(f"bot> {text}" if interactive else " ".join(text.split()), flush=True)
        if interactive and last.citations:
            print("      " + "; ".join(f"[{c.n}] {c.title}" for c in last.citations), flush=True)
    if store is not None:
        store.close()
    return 0


def _print_sources(result) -> None:
    if result is None:
        print("(no answer yet)", file=sys.stderr)
        return
    if result.standalone:
        print(f"searched: {result.standalone}")
    if not result.citations:
        print("(the last answer cites no passage)")
    for c in result.citations:
        page = f", p. {c.page}" if c.page else ""
        print(f"  [{c.n}] {c.title} — {c.source}{page}")
