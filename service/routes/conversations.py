"""Conversation threads the server keeps (`thread_id` on `POST /v1/ask` and its stream): their turns, and deleting
one. A thread belongs to the key that made it: another key gets 404, an expired thread 410."""

from __future__ import annotations

from fastapi import APIRouter, Response

from switchyard.service.dependencies import PrincipalDep, ServiceDep
from switchyard.service.schemas import AUTHENTICATED, Conversation, error_responses

router = APIRouter(responses=error_responses(*AUTHENTICATED, 400, 404, 410))


@router.get("/v1/conversations/{thread_id}")
def conversation(thread_id: str, service: ServiceDep, principal: PrincipalDep) -> Conversation:
    """The thread's messages, oldest first (a question, its answer, ...)."""
    messages = service.conversations.turns(thread_id, principal.name, missing_ok=False)
    return Conversation(thread_id=thread_id, messages=messages)


@router.delete("/v1/conversations/{thread_id}", status_code=204)
def delete_conversation(thread_id: str, service: ServiceDep, principal: PrincipalDep) -> Response:
    service.conversations.delete(thread_id, principal.name, check_owner=True)
    return Response(status_code=204)
