"""Authentication for every route but the public ones (health check, the web page's files), and the per-key request
rate.

A plain ASGI middleware (not BaseHTTPMiddleware), so streamed responses and client disconnects pass through
untouched. A request presents `Authorization: Bearer <credential>`: the server's shared token
(`SWITCHYARD_API_TOKEN`, compared in constant time; it opens everything) or an API key of the index's key store
(service/keys.py; it opens what the key allows). While keys exist the shared token is refused unless the server was
started with `token_with_keys` (`serve --allow-token-with-keys`). With neither a token nor any key, the server is open
(the local user). A key file that others may read refuses every request (503) until it is fixed. The credential is
never logged. An authenticated request carries its `Principal` in `request.state.principal`, which the routes and
the MCP server's access check read; a key past its requests per minute gets 429 with `Retry-After`.
"""

from __future__ import annotations

import hmac
import json
import logging
import math

from switchyard.errors import AccessError, StateUnavailable
from switchyard.service.keys import LOCAL, TOKEN, KeyStore, LocalRateLimiter, Principal, RateLimiter
from switchyard.service.openai_compat import OPENAI_PREFIX, openai_error_body

log = logging.getLogger("switchyard.service")
UNAUTHENTICATED = "missing or wrong bearer token or API key (Authorization: Bearer <key>)"
TOKEN_REFUSED = (
    "the shared token is refused while API keys exist; use an API key (or start the server with "
    "--allow-token-with-keys)"
)

PUBLIC_PATHS = ("/healthz", "/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)


def principal_of(scope_or_request) -> Principal:
    """The principal the auth recorded (LOCAL when the server runs open)."""
    scope = getattr(scope_or_request, "scope", scope_or_request)
    return (scope.get("state") or {}).get("principal") or LOCAL


def describe_credentials(token: str | None, keys: KeyStore, token_with_keys: bool = False) -> str:
    """One line naming what opens the server: the shared token (on, off or refused) and the API keys."""
    listed = keys.list()
    admins = sum(1 for k in listed if k["admin"])
    if token and listed and not token_with_keys:
        shared = "shared token refused while keys exist"
    else:
        shared = "shared token " + ("on (opens everything)" if token else "off")
    if not token and not listed:
        return "credentials: none, the server is open to anyone who can reach it"
    return f"credentials: {shared}; {len(listed)} API key(s), {admins} admin"


class BearerAuth:
    def __init__(
        self,
        app,
        token: str | None,
        keys: KeyStore | None = None,
        limiter: RateLimiter | None = None,
        token_with_keys: bool = False,
    ):
        self.app = app
        self.token = token.encode() if token else None
        self.keys = keys
        self.limiter = limiter or LocalRateLimiter()
        self.token_with_keys = token_with_keys

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self._public(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            keys_exist = bool(self.keys and self.keys.active())
        except AccessError as exc:  # an unsafe or unreadable key file: fail closed
            log.error("refusing requests: %s", exc)
            await _reply(scope, send, 503, "the server's API key file cannot be used; see the server log", [])
            return
        except StateUnavailable as exc:  # the shared state database is down: fail closed, say when to retry
            await _unavailable(scope, send, exc)
            return
        if self.token is None and not keys_exist:
            scope.setdefault("state", {})["principal"] = LOCAL
            await self.app(scope, receive, send)
            return
        try:
            principal = self._authenticate(scope, keys_exist)
            wait = (
                self.limiter.hit(principal.name, principal.rpm)
                if isinstance(principal, Principal) and principal.rpm
                else None
            )
        except StateUnavailable as exc:
            await _unavailable(scope, send, exc)
            return
        if not isinstance(principal, Principal):
            await _reply(scope, send, 401, principal, [(b"www-authenticate", b"Bearer")])
            return
        scope.setdefault("state", {})["principal"] = principal
        if wait is not None:
            await _reply(
                scope,
                send,
                429,
                f"key {principal.name!r} is past its {principal.rpm} requests per minute; retry shortly",
                [(b"retry-after", str(max(1, math.ceil(wait))).encode())],
            )
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _public(path: str) -> bool:
        return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)

    def _authenticate(self, scope, keys_exist: bool) -> Principal | str:
        """The request's principal, or why it is refused."""
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        given = given.strip()
        if scheme.lower() != b"bearer" or not given:
            return UNAUTHENTICATED
        if self.token is not None and hmac.compare_digest(given, self.token):
            return TOKEN if self.token_with_keys or not keys_exist else TOKEN_REFUSED
        if self.keys is not None:
            return self.keys.verify(given.decode("ascii", "replace")) or UNAUTHENTICATED
        return UNAUTHENTICATED


async def _unavailable(scope, send, exc: StateUnavailable) -> None:
    log.error("refusing requests: %s", exc.message)
    await _reply(scope, send, 503, exc.message, [(b"retry-after", exc.headers["Retry-After"].encode())])


async def _reply(scope, send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    """The refusal as the route's error family words it: `{"detail"}`, or OpenAI's `{"error"}` on the chat routes."""
    openai = scope["path"].startswith(OPENAI_PREFIX)
    body = json.dumps(openai_error_body(status, detail) if openai else {"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
