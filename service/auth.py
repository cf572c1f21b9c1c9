"""Bearer-token authentication for every route but the public ones (health check, the web page's files).

A plain ASGI middleware (not BaseHTTPMiddleware), so streamed responses and client disconnects pass through
untouched. The token is compared in constant time and never logged. An authenticated request carries its identity
in `request.state.identity` (`IDENTITY_TOKEN`; absent when the server runs without a token), which the MCP
server's access check receives.
"""
from __future__ import annotations

import hmac
import json

PUBLIC_PATHS = ("/healthz", "/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)
IDENTITY_TOKEN = "token"  # the one identity there is today: the holder of the server's token


class BearerAuth:
    def __init__(self, app, token: str | None):
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.token is None or self._public(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self._valid(scope):
            scope.setdefault("state", {})["identity"] = IDENTITY_TOKEN
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": "missing or wrong bearer token (Authorization: Bearer <token>)"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    def _public(path: str) -> bool:
        return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)

    def _valid(self, scope) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)
