"""Paused runs (graph.router.approve): where one stands, and the human's answer to it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from switchyard.graphs.results import Paused
from switchyard.nodes.approve import Approval
from switchyard.service.dependencies import PrincipalDep, ServiceDep
from switchyard.service.schemas import AUTHENTICATED, ThreadDone, ThreadStatus, error_responses

router = APIRouter(responses=error_responses(*AUTHENTICATED, 400, 404, 409, 410, 422, 501, 502, 504))


@router.post("/v1/threads/{thread_id}/resume")
async def resume(thread_id: str, body: Approval, service: ServiceDep, principal: PrincipalDep) -> Paused | ThreadDone:
    """Answer a paused run (graph.router.approve): approve its pending action, edit its arguments or reject
    it; the reply is the next pause or the result."""
    return await service.resume_thread(principal, thread_id, body)


@router.get("/v1/threads/{thread_id}", response_model=ThreadStatus)
def thread_status(thread_id: str, service: ServiceDep, principal: PrincipalDep) -> dict[str, Any]:
    thread, pipe = service.thread(principal, thread_id)
    if thread.expired():
        return {"thread_id": thread_id, "status": "expired"}
    paused = pipe.pending(thread_id) if thread.state == "paused" else None
    return {
        "thread_id": thread_id,
        "status": thread.state,
        "pending": paused and paused.pending,
        "expires_at": paused and paused.expires_at,
    }
