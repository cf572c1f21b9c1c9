"""The audit log: one JSON line per request, written when its response ends (a stream: when the stream ends).

    {"time": "2026-01-01T12:00:00.123Z", "key": "acme", "method": "POST", "route": "/v1/ask",
     "collection": "manuals", "status": 200, "ms": 812.4}

`key` is the key's name (`token` for the shared token, `local` for an open server, null for a request refused
before it was identified); never the key itself. `collection` is what the route resolved (null for routes without
one). The question is added only with `questions=True` (`serve --audit-questions`). Routes record collection and
question in `request.state.audit` (see `note`). Lines go to a file (`serve --audit-log FILE`) or, without one, to the
`switchyard.audit` logger; with `serve --state postgresql://...`, one row each in the database's `audit_log` table
(service/postgres.py), whichever server answered.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from switchyard.errors import StateUnavailable

log = logging.getLogger("switchyard.audit")


def note(request, collection: str | None = None, question: str | None = None) -> None:
    """Record what the audit line of this request should say about it."""
    audit = request.scope.setdefault("state", {}).setdefault("audit", {})
    if collection is not None:
        audit["collection"] = collection
    if question is not None:
        audit["question"] = question


class AuditSink(Protocol):
    """Where audit lines go: `AuditLog` (a file or the logger) or service/postgres.py's `PostgresAuditLog`."""

    questions: bool

    def write(self, record: dict) -> None: ...


class AuditLog:
    """One JSON line per request in a file, or to the `switchyard.audit` logger."""

    def __init__(self, path: Path | None = None, questions: bool = False):
        self.path = Path(path) if path else None
        self.questions = questions
        self._lock = threading.Lock()
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False)
        if self.path is None:
            log.info(line)
            return
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


class AuditMiddleware:
    """Outside the auth, so refused requests (401, 429) are audited too."""

    def __init__(self, app, audit: AuditSink):
        self.app = app
        self.audit = audit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def sending(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            state = scope.get("state") or {}
            principal, noted = state.get("principal"), state.get("audit") or {}
            record = {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "key": principal.name if principal else None,
                "method": scope.get("method"),
                "route": scope.get("path"),
                "collection": noted.get("collection"),
                "status": status["code"],
                "ms": round((time.perf_counter() - started) * 1e3, 1),
            }
            if self.audit.questions and noted.get("question") is not None:
                record["question"] = noted["question"]
            try:
                self.audit.write(record)
            except StateUnavailable as exc:  # the reply already says so (503); one line, not a traceback each
                log.warning("audit line not written: %s", exc.message)
            except Exception:  # a full disk must not turn the reply into a 500
                log.exception("cannot write the audit line")
