"""API keys and what each may do: `Principal` (who a request is: its collections, write and admin rights, access
groups and limits), `KeyStore` (the keys a server accepts) and the per-key limits (`RateLimiter`: requests per
minute; `KeyRuns`: runs in flight), each an interface whose `Local*` implementation counts in one process.

A key is `sy_<id>_<secret>`: the id finds its record, the secret is checked against a salted hash. A store holds the
id, the salt and the hash, never the key; `keys create` prints the key once. `KeyStore` is the interface (checks,
verification, listing); `FileKeyStore` keeps the records in a JSON file beside the index, the embedded default, and
service/postgres.py's `PostgresKeyStore` in a database that many servers share. The file's writes take an
exclusive `flock` and replace it atomically, so concurrent `keys create` commands and a server reading the file never
see half of it; a server re-reads the file when it changes, so a revoked key stops working at once. A file that
other users may read or write is refused (AccessError), as ssh refuses such a private key.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from switchyard.configs.schema import StoreConfig
from switchyard.errors import AccessError
from switchyard.retrievers.filters import parse_labels
from switchyard.run_context import ALL, Scope
from switchyard.service.settings import beside_index

KEYS_NAME = ".switchyard-keys.json"
KEY_PREFIX = "sy_"
# The secret is 32 random bytes, so the hash guards the file against being read, not against guessing: a few
# thousand rounds keep verification cheap on every request.
HASH_ROUNDS = 2000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY = re.compile(r"^sy_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")


@dataclass(frozen=True)
class Principal:
    """Who a request is and what it may do. `collections` None: every collection; `groups` None: every document
    (else only documents unlabelled or labelled with one of them); `rpm` / `max_in_flight` 0: no per-key limit."""

    name: str
    collections: tuple[str, ...] | None = None
    write: bool = True
    admin: bool = True
    groups: tuple[str, ...] | None = None
    rpm: int = 0
    max_in_flight: int = 0

    def can_read(self, collection: str) -> bool:
        return self.admin or self.collections is None or collection in self.collections

    def can_write(self, collection: str) -> bool:
        return self.can_read(collection) and (self.write or self.admin)

    @property
    def restricted(self) -> bool:
        return not self.admin

    @property
    def scope(self) -> Scope:
        """What the principal may read: ALL for the local caller, the shared token and admin keys (no groups),
        else its groups."""
        return ALL if self.groups is None else self.groups


LOCAL = Principal("local")  # stdio, in-process, or a server with neither token nor keys
TOKEN = Principal("token")  # the holder of SWITCHYARD_API_TOKEN


@dataclass(frozen=True)
class KeyRecord:
    name: str
    key_id: str
    salt: str
    hash: str
    collections: tuple[str, ...]
    write: bool
    admin: bool
    groups: tuple[str, ...]
    rpm: int
    max_in_flight: int
    created: float

    def principal(self) -> Principal:
        return Principal(
            self.name,
            None if self.admin else self.collections,
            self.write,
            self.admin,
            None if self.admin else self.groups,
            self.rpm,
            self.max_in_flight,
        )

    @classmethod
    def from_dict(cls, data: dict) -> KeyRecord:
        return cls(**{**data, "collections": tuple(data["collections"]), "groups": tuple(data["groups"])})

    def public(self) -> dict:
        """What `keys list` shows: everything but the salt and hash."""
        out = asdict(self)
        del out["salt"], out["hash"]
        return out


def _digest(secret: str, salt: bytes) -> str:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, HASH_ROUNDS).hex()


def keys_path(store_uri: str, upload_dir: Path) -> Path:
    """The key file, beside the index (as the job store)."""
    return beside_index(store_uri, upload_dir, KEYS_NAME)


def new_key(
    name: str,
    collections: Sequence[str] | str | None = None,
    *,
    write: bool = False,
    admin: bool = False,
    groups: Sequence[str] | str | None = None,
    rpm: int = 0,
    max_in_flight: int = 0,
) -> tuple[str, KeyRecord]:
    """A new key, checked, and its record (what a store keeps)."""
    if not _NAME.match(name or ""):
        raise AccessError(f"invalid key name {name!r} (1-64 letters, digits, '_', '.', '-')")
    names = [
        c.strip() for c in (collections.split(",") if isinstance(collections, str) else collections or []) if c.strip()
    ]
    for collection in names:
        try:
            StoreConfig(collection=collection)
        except ValueError:
            raise AccessError(f"invalid collection name {collection!r}") from None
    if not names and not admin:
        raise AccessError("a key needs --collections (or --admin, which opens every collection)")
    if rpm < 0 or max_in_flight < 0:
        raise AccessError("limits must be >= 0 (0: no limit)")
    secret, salt = secrets.token_urlsafe(32), secrets.token_bytes(16)
    record = KeyRecord(
        name=name,
        key_id=secrets.token_hex(6),
        salt=salt.hex(),
        hash=_digest(secret, salt),
        collections=tuple(sorted(set(names))),
        write=write,
        admin=admin,
        groups=parse_labels(groups),
        rpm=rpm,
        max_in_flight=max_in_flight,
        created=time.time(),
    )
    return f"{KEY_PREFIX}{record.key_id}_{secret}", record


class KeyStore(abc.ABC):
    """The keys a server accepts, by id. Implementations keep the records; checks and verification live here."""

    @property
    @abc.abstractmethod
    def where(self) -> str:
        """Where the keys are kept, for messages (a path, or the database without its credentials)."""

    @abc.abstractmethod
    def records(self) -> dict[str, KeyRecord]:
        """The keys by id, as they are now (a key created or revoked elsewhere shows within a second)."""

    @abc.abstractmethod
    def add_record(self, record: KeyRecord) -> None:
        """Keep a new record (from `new_key`, or another store's); AccessError if a key of that name exists."""

    @abc.abstractmethod
    def revoke(self, name: str) -> None:
        """Remove the key of that name; AccessError if there is none."""

    def active(self) -> bool:
        return bool(self.records())

    def list(self) -> list[dict]:
        return sorted((r.public() for r in self.records().values()), key=lambda r: r["name"])

    def verify(self, key: str) -> Principal | None:
        """The principal of a presented key, None if it is no valid key (compared in constant time)."""
        match = _KEY.match(key)
        record = self.records().get(match.group(1)) if match else None
        if match is None or record is None:
            return None
        given = _digest(match.group(2), bytes.fromhex(record.salt))
        return record.principal() if hmac.compare_digest(given, record.hash) else None

    def create(self, name: str, collections: Sequence[str] | str | None = None, **rights) -> str:
        """Record a new key and return it (the only time it is seen in clear). `rights`: `new_key`'s keywords."""
        key, record = new_key(name, collections, **rights)
        self.add_record(record)
        return key


class FileKeyStore(KeyStore):
    """The keys in a JSON file (mode 0600) beside the index: one machine's servers and `keys` commands share it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple | None = None
        self._records: dict[str, KeyRecord] = {}

    @property
    def where(self) -> str:
        return str(self.path)

    # -- reading ----------------------------------------------------------------------------------------------
    def _stamp(self) -> tuple | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode

    def _read(self) -> dict[str, KeyRecord]:
        try:
            mode = self.path.stat().st_mode
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise AccessError(f"cannot read the key file {self.path}: {exc}") from None
        if mode & 0o077:  # as ssh does for a private key: the hashes are only as safe as the file
            raise AccessError(
                f"the key file {self.path} is open to other users (mode {mode & 0o777:04o}); run chmod 600 on it"
            )
        return {r["key_id"]: KeyRecord.from_dict(r) for r in data.get("keys", [])}

    def records(self) -> dict[str, KeyRecord]:
        """The keys by id, re-read when the file changed (a key created or revoked by another process)."""
        with self._lock:
            stamp = self._stamp()
            if stamp != self._seen:
                self._records, self._seen = self._read(), stamp
            return self._records

    # -- writing ----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, records: dict[str, KeyRecord]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        body = json.dumps({"keys": [asdict(r) for r in sorted(records.values(), key=lambda r: r.name)]}, indent=1)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)

    def add_record(self, record: KeyRecord) -> None:
        with self._locked():
            records = self._read()
            if any(r.name == record.name for r in records.values()):
                raise AccessError(f"a key named {record.name!r} exists; revoke it first")
            records[record.key_id] = record
            self._write(records)

    def revoke(self, name: str) -> None:
        with self._locked():
            records = self._read()
            kept = {k: r for k, r in records.items() if r.name != name}
            if len(kept) == len(records):
                raise AccessError(f"no key named {name!r}")
            self._write(kept)


class RateLimiter(abc.ABC):
    """Requests per minute per key, over a sliding 60 s window."""

    WINDOW_S = 60.0

    @abc.abstractmethod
    def hit(self, name: str, per_minute: int) -> float | None:
        """Count one request of `name`; None if allowed, else the seconds until one is allowed again."""


class LocalRateLimiter(RateLimiter):
    """The window of one process, in memory; thread-safe."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._hits: dict[str, deque] = {}
        self._lock = threading.Lock()

    def hit(self, name: str, per_minute: int) -> float | None:
        now = self._clock()
        with self._lock:
            hits = self._hits.setdefault(name, deque())
            while hits and hits[0] <= now - self.WINDOW_S:
                hits.popleft()
            if len(hits) >= per_minute:
                return hits[0] + self.WINDOW_S - now
            hits.append(now)
            return None


class KeyRuns(abc.ABC):
    """Runs in flight per key; `try_acquire` never waits."""

    @abc.abstractmethod
    def try_acquire(self, name: str, limit: int) -> bool: ...

    @abc.abstractmethod
    def release(self, name: str) -> None: ...


class LocalKeyRuns(KeyRuns):
    """The runs of one process, in memory; thread-safe."""

    def __init__(self):
        self._active: dict[str, int] = {}
        self._lock = threading.Lock()

    def try_acquire(self, name: str, limit: int) -> bool:
        with self._lock:
            if self._active.get(name, 0) >= limit:
                return False
            self._active[name] = self._active.get(name, 0) + 1
            return True

    def release(self, name: str) -> None:
        with self._lock:
            self._active[name] -= 1
