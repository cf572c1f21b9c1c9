"""`POST /v1/chat/completions`: Switchyard as an OpenAI-compatible model (service/openai_compat.py). Its errors,
the error family's included, are worded the OpenAI way (`{"error": {message, type, code}}`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.routing import APIRoute
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask

from switchyard.errors import SwitchyardError
from switchyard.service.dependencies import ChatQuestion, ChatSlot, ServiceDep
from switchyard.service.error_responses import headers_of, message_of, status_of
from switchyard.service.openai_compat import ChatRequest, chat_completion, chat_stream, openai_error


class OpenAIErrors(APIRoute):
    """A route whose Switchyard errors, from its providers or itself, are OpenAI-style error replies."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def openai_errors(request):
            try:
                return await handler(request)
            except SwitchyardError as exc:
                return openai_error(status_of(exc), message_of(exc), headers_of(exc))

        return openai_errors


router = APIRouter(route_class=OpenAIErrors)


@router.post("/v1/chat/completions")
async def chat(body: ChatRequest, question: ChatQuestion, slot: ChatSlot, service: ServiceDep):
    if body.stream:
        events = service.events(question.pipe, question.name, question.text, None, slot, question.principal)
        return EventSourceResponse(chat_stream(events, question.name), ping=15, background=BackgroundTask(slot.release))
    try:
        result = await service.ask(question.pipe, question.name, question.text, None, question.principal)
    finally:
        slot.release()
    return chat_completion(result, question.name)
