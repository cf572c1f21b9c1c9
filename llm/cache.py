"""Recorded LLM replies: a folder of request -> reply files, and a backend wrapper that answers from it.

`CachingBackend` wraps any chat backend. A request is keyed by the sha256 of its canonical JSON: the model's
identity (`llm_identity` in llm/client.py: backend, model, and for a GGUF the settings that change its replies), the
messages, the JSON schema, any further request option a backend takes (tools, ...), and the sampling parameters
(seed, max_tokens, temperature). A request seen before is answered from the folder: its text goes to `on_token` word
by word and its stored token counts are returned, so streaming and usage accounting are those of the recorded run.
A request not seen goes to the wrapped backend and its reply is stored. Without a wrapped backend (replay), a request
not seen is an `LLMCacheMiss` naming it.

A folder holds one run's replies in at most two files: `replies.jsonl.xz`, the packed replies (one compact JSON
line per entry, sorted by key; written by `bench/pack_run.py`), and `replies.jsonl`, the append log a live run
records into: one line per reply, appended under a file lock, so concurrent writers (eval --workers, several
processes) never interleave; a last line torn by a process that died mid-write is trimmed on read (and before the
next append). Two writers of one key write the same request; the later line wins. Folders recorded before this
layout, one JSON file per key (`DIR/ab/abcd....json`), are still read. A reply cut short by cancellation is never
stored.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import threading
from dataclasses import asdict
from pathlib import Path

from filelock import FileLock

from switchyard.errors import LLMCacheMiss, LLMError
from switchyard.llm.backend import ChatBackend, Messages, Reply, send_words
from switchyard.run_context import TokenSink


def request_key(request: dict) -> str:
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


PACKED = "replies.jsonl.xz"
LOG = "replies.jsonl"


def entry_line(entry: dict) -> str:
    """One entry as a line of the log or the packed file (compact, keys sorted, no trailing newline)."""
    return json.dumps(entry, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class ReplyStore:
    """The replies recorded under `root` (see the module docstring for the layout); safe for any number of threads
    and processes. Entries are read once into memory; a key not found there is looked up again in what the log
    gained since (another process may have recorded it) and in the old one-file-per-key layout."""

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()
        self._lock = threading.Lock()
        self._entries: dict[str, dict] | None = None
        self._log_read = 0  # bytes of the log read into _entries

    @property
    def log_path(self) -> Path:
        return self.root / LOG

    @property
    def packed_path(self) -> Path:
        return self.root / PACKED

    def path(self, key: str) -> Path:
        """Where the old layout keeps `key`'s reply (read only)."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        with self._lock:
            if self._entries is None:
                self._entries = self._read_packed()
                self._read_log()
            entry = self._entries.get(key)
            if entry is None:
                self._read_log()
                entry = self._entries.get(key)
        return entry if entry is not None else self._get_file(key)

    def _get_file(self, key: str) -> dict | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            Reply(**entry["reply"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:  # edited by hand: never written half
            raise LLMError(
                f"{path} is not a recorded reply ({type(exc).__name__}); delete it to record it again"
            ) from None
        return entry

    def _read_packed(self) -> dict[str, dict]:
        if not self.packed_path.is_file():
            return {}
        try:
            with lzma.open(self.packed_path, "rt", encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise LLMError(f"{self.packed_path} is not a packed reply file ({type(exc).__name__}: {exc})") from None
        entries: dict[str, dict] = {}
        for n, line in enumerate(text.splitlines(), 1):
            self._add_line(entries, line, self.packed_path, n)
        return entries

    def _read_log(self) -> None:
        """Add the log's complete lines written since the last read (call under the lock)."""
        assert self._entries is not None
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self._log_read)
                data = fh.read()
        except FileNotFoundError:
            return
        whole = data[: data.rfind(b"\n") + 1]  # a torn last line (a writer died mid-line) is not a reply
        for line in whole.decode("utf-8").splitlines():
            self._add_line(self._entries, line, self.log_path, None)
        self._log_read += len(whole)

    @staticmethod
    def _add_line(entries: dict[str, dict], line: str, path: Path, n: int | None) -> None:
        if not line.strip():
            return
        try:
            entry = json.loads(line)
            Reply(**entry["reply"])
            entries[entry["key"]] = entry
        except (ValueError, KeyError, TypeError) as exc:  # edited by hand: never written half, see put()
            where = f"{path} line {n}" if n else str(path)
            raise LLMError(
                f"{where} is not a recorded reply ({type(exc).__name__}); delete that line to record it again"
            ) from None

    def keys(self) -> set[str]:
        """Every key recorded under `root`, in any layout."""
        with self._lock:
            self._entries = self._read_packed()
            self._log_read = 0
            self._read_log()
            found = set(self._entries)
        return found | {p.stem for p in self.root.glob("??/*.json")}

    @staticmethod
    def _last_byte(fh, size: int) -> bytes:
        fh.seek(size - 1)
        return fh.read(1)

    def put(self, key: str, entry: dict) -> None:
        line = (entry_line(entry) + "\n").encode("utf-8")
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(self.root / ".replies.lock"), self.log_path.open("ab+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size and self._last_byte(fh, size) != b"\n":  # a torn last line: cut it off before appending
                fh.seek(max(0, size - (1 << 20)))
                tail = fh.read()
                cut = tail.rfind(b"\n")
                if cut >= 0 or size <= len(tail):
                    fh.truncate(size - len(tail) + cut + 1)
                else:  # no line end in the last MiB: end the torn line (read as an error) rather than guess
                    fh.write(b"\n")
            fh.write(line)
            fh.flush()
        with self._lock:
            if self._entries is not None:
                self._entries[key] = entry


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
        self.replayed = 0  # requests answered from the store
        self.recorded = 0  # requests answered by the model and stored

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

    def request(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        json_schema: dict | None,
        seed: int | None,
        **options,
    ) -> dict:
        """What keys a call. Options a backend takes beyond the common ones count only when given (not None), so
        a new optional parameter leaves the keys of earlier recordings as they were."""
        return {
            **self.identity,
            "messages": messages,
            "json_schema": json_schema,
            "seed": self.default_seed if seed is None else seed,
            "max_tokens": max_tokens,
            "temperature": temperature,
            **{k: v for k, v in options.items() if v is not None},
        }

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
        **options,
    ) -> Reply:
        request = self.request(
            messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema, seed=seed, **options
        )
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
        reply = self.inner.chat(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            json_schema=json_schema,
            seed=seed,
            on_token=on_token,
            cancelled=cancelled,
            **options,
        )
        if cancelled is None or not cancelled.is_set():  # a reply cut short is not the model's reply
            stored = {
                k: v
                for k, v in asdict(reply).items()  # files as before tools and the cached flag
                if (k != "tool_calls" or v) and k != "cached"
            }
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
        return (
            f"no recorded LLM reply in {where} for request {key[:16]} ({request['backend']} {request['model']}, "
            f"seed {request['seed']}, temperature {request['temperature']}, max_tokens {request['max_tokens']}; "
            f"system: {_first_words(system)!r}; user: {_first_words(user)!r}); run without replay to record it "
            "(eval --llm-cache DIR without --replay)"
        )
