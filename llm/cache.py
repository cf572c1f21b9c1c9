"""Recorded LLM replies: a folder of request -> reply files, and a backend wrapper that answers from it.

`CachingBackend` wraps any chat backend. A request is keyed by the sha256 of its canonical JSON: the model's
identity (`llm_identity` in llm/client.py: backend, model, and for a GGUF the settings that change its replies), the
messages, the JSON schema, any further request option a backend takes (tools, ...), and the sampling parameters
(seed, max_tokens, temperature). A request seen before is answered from the folder: its text goes to `on_token` word
by word and its stored token counts are returned, so streaming and usage accounting are those of the recorded run.
A request not seen goes to the wrapped backend and its reply is stored. Without a wrapped backend (replay), a request
not seen is an `LLMCacheMiss` naming it.

The folder holds one JSON file per key (`DIR/ab/abcd....json`), written to a temporary file and renamed into place:
concurrent writers (eval --workers, several processes) never leave a torn or mixed file, and two writers of one key
write the same request (the last rename wins). A reply cut short by cancellation is never stored.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

from switchyard.llm.backend import ChatBackend, Messages, Reply, send_words
from switchyard.errors import LLMError
from switchyard.llm.context import TokenSink
from switchyard.errors import LLMCacheMiss


def request_key(request: dict) -> str:
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ReplyStore:
    """One JSON file per request key under `root`; safe for any number of threads and processes."""

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            Reply(**entry["reply"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:  # edited by hand: never written half, see put()
            raise LLMError(f"{path} is not a recorded reply ({type(exc).__name__}); delete it to record it again") \
                from None
        return entry

    def put(self, key: str, entry: dict) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{key[:8]}-",
                                         suffix=".tmp", delete=False) as tmp:
            json.dump(entry, tmp, ensure_ascii=False, indent=1, sort_keys=True)
        os.replace(tmp.name, path)


def _first_words(text: str, n: int = 10) -> str:
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


class CachingBackend:
    """Answers from `store` when it can, otherwise from `inner` (recording the reply); `inner=None` replays only.
    `identity` names the model (it is part of every key); `default_seed` is the seed `inner` uses when a call
    brings none (the local backend's configured seed), so such calls are keyed by the seed that produced them."""

    def __init__(self, inner: ChatBackend | None, store: ReplyStore, identity: dict, default_seed: int | None = None):
        if not identity.get("backend") or not identity.get("model"):
            raise ValueError("identity needs 'backend' and 'model'")
        self.inner = inner
        self.store = store
        self.identity = dict(identity)
        self.default_seed = default_seed
        self.name = self.identity["backend"]
        self._lock = threading.Lock()
        self.replayed = 0   # requests answered from the store
        self.recorded = 0   # requests answered by the model and stored

    @property
    def replay(self) -> bool:
        return self.inner is None

    @property
    def base_url(self) -> str | None:
        return getattr(self.inner, "base_url", None)

    def warm_up(self) -> None:
        warm_up = getattr(self.inner, "warm_up", None)
        if warm_up is not None:
            warm_up()

    def request(self, messages: Messages, *, max_tokens: int, temperature: float, json_schema: dict | None,
                seed: int | None, **options) -> dict:
        """What keys a call. Options a backend takes beyond the common ones count only when given (not None), so
        a new optional parameter leaves the keys of earlier recordings as they were."""
        return {**self.identity, "messages": messages, "json_schema": json_schema,
                "seed": self.default_seed if seed is None else seed, "max_tokens": max_tokens,
                "temperature": temperature, **{k: v for k, v in options.items() if v is not None}}

    def chat(self, messages: Messages, *, max_tokens: int, temperature: float, json_schema: dict | None = None,
             seed: int | None = None, on_token: TokenSink | None = None,
             cancelled: threading.Event | None = None, **options) -> Reply:
        request = self.request(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema,
                               seed=seed, **options)
        key = request_key(request)
        entry = self.store.get(key)
        if entry is not None:
            reply = Reply(**entry["reply"], cached=True)
            if on_token is not None:
                send_words(reply.text, on_token)
            self._count("replayed")
            return reply
        if self.inner is None:
            raise LLMCacheMiss(self._miss(key, request))
        reply = self.inner.chat(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema,
                                seed=seed, on_token=on_token, cancelled=cancelled, **options)
        if cancelled is None or not cancelled.is_set():  # a reply cut short is not the model's reply
            stored = {k: v for k, v in asdict(reply).items()  # files as before tools and the cached flag
                      if (k != "tool_calls" or v) and k != "cached"}
            self.store.put(key, {"key": key, "request": request, "reply": stored})
            self._count("recorded")
        return reply

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def _miss(self, key: str, request: dict) -> str:
        where = self.store.root if self.store.root.is_dir() else f"{self.store.root} (no such folder)"
        messages = request["messages"]
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        return (f"no recorded LLM reply in {where} for request {key[:16]} ({request['backend']} {request['model']}, "
                f"seed {request['seed']}, temperature {request['temperature']}, max_tokens {request['max_tokens']}; "
                f"system: {_first_words(system)!r}; user: {_first_words(user)!r}); run without replay to record it "
                "(eval --llm-cache DIR without --replay)")
