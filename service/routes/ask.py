"""`POST /v1/ask` (the `ask --json` object, or a pause of a pipeline that waits for approval) and
`POST /v1/ask/stream` (Server-Sent Events, one per stream event; a client that disconnects cancels its run)."""

from __future__ import annotations

import json

from fastapi import APIRouter
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask

from switchyard.errors import UsageError
from switchyard.graphs.results import AskResult, Paused
from switchyard.service.dependencies import AskQuestion, AskSlot, ServiceDep, StreamQuestion, StreamSlot
from switchyard.service.schemas import AUTHENTICATED, ThreadDone, error_responses

router = APIRouter(responses=error_responses(*AUTHENTICATED, 400, 404, 409, 413, 501, 502, 504))


@router.post("/v1/ask")
async def ask(question: AskQuestion, _slot: AskSlot, service: ServiceDep) -> AskResult | Paused | ThreadDone:
    if question.pipe.pauses:
        if question.history or question.thread_id:
            raise UsageError(f"pipeline {question.name!r} pauses for approval: it answers one question at a time")
        return await service.start_thread(
            question.pipe, question.name, question.text, question.where, question.principal
        )
    return await service.ask(
        question.pipe,
        question.name,
        question.text,
        question.where,
        question.principal,
        history=question.history,
        thread_id=question.thread_id,
    )


@router.post("/v1/ask/stream")
async def ask_stream(question: StreamQuestion, slot: StreamSlot, service: ServiceDep):
    async def sse():
        async for event in service.events(
            question.pipe,
            question.name,
            question.text,
            question.where,
            slot,
            question.principal,
            history=question.history,
            thread_id=question.thread_id,
        ):
            yield {"event": event.event, "data": json.dumps(event.to_json(), ensure_ascii=False)}

    # the background task gives the place back even when the client left before the stream began
    return EventSourceResponse(sse(), ping=15, background=BackgroundTask(slot.release))
