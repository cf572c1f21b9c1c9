"""The HTTP routes, one `APIRouter` per resource; service/app.py includes them all. A route takes what it needs
from the providers of service/dependencies.py and raises the error family (service/error_responses.py words the
reply)."""

from __future__ import annotations

from switchyard.service.routes import ask, chat, collections, conversations, jobs, search, system, threads

ROUTERS = (
    system.router,
    ask.router,
    conversations.router,
    threads.router,
    chat.router,
    search.router,
    collections.router,
    jobs.router,
)
