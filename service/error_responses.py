"""How an error leaving a route becomes the JSON reply `{"detail": "..."}`: a Switchyard error (package/errors.py)
with the status its class carries (`ServiceError`: per instance, with its headers, e.g. `Retry-After`) and its one
line; anything else a 500 `internal error: TYPE: message`, its traceback in the log. The chat endpoint words the
same errors the OpenAI way (routes/chat.py)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from switchyard.errors import ServiceError, SwitchyardError, first_line

log = logging.getLogger("switchyard.service")


def status_of(exc: BaseException) -> int:
    """The HTTP status of an error, by its type: the caller's mistake (4xx), the model server's (502), anything
    unexpected 500."""
    return exc.http_status if isinstance(exc, SwitchyardError) else 500


def message_of(exc: BaseException) -> str:
    return exc.message if isinstance(exc, ServiceError) else first_line(exc)


def headers_of(exc: BaseException) -> dict:
    return exc.headers if isinstance(exc, ServiceError) else {}


def run_error(exc: Exception) -> SwitchyardError:
    """A run's failure as the error the client gets: ours as they are, anything else a 500 with its one line."""
    return exc if isinstance(exc, SwitchyardError) else ServiceError(500, first_line(exc))


async def switchyard_error(_request: Request, exc: SwitchyardError) -> JSONResponse:
    return JSONResponse({"detail": message_of(exc)}, status_code=status_of(exc), headers=headers_of(exc))


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {first_line(exc)}"}, status_code=500)


def install(app: FastAPI) -> None:
    # Starlette types every handler as taking any Exception; it calls this one for SwitchyardError only
    app.add_exception_handler(SwitchyardError, switchyard_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, unexpected)
