"""`POST /v1/chat/completions`: Switchyard as an OpenAI-compatible model (service/openai_compat.py). Its errors,
the error family's included, are worded the OpenAI way (`{"error": {message, type, code}}`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from sse_starlette.sse import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException

from switchyard.errors import SwitchyardError
from switchyard.service.dependencies import ChatQuestion, ChatSlot, ServiceDep
from switchyard.service.error_responses import headers_of, message_of, status_of
from switchyard.service.openai_compat import ChatRequest, chat_completion, chat_stream, openai_error
from switchyard.service.schemas import AUTHENTICATED, OpenAIErrorReply, error_responses


class OpenAIErrors(APIRoute):
    """A route whose errors, from its providers, itself or the request's parsing and validation, are OpenAI-style
    error replies (the authentication in front words its refusals the same way: service/auth.py)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def openai_errors(request):
            try:
                return await handler(request)
            except SwitchyardError as exc:
                return openai_error(status_of(exc), message_of(exc), headers_of(exc))
            except RequestValidationError as exc:  # a body that does not validate: 400, as OpenAI answers it
                first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
                if first.get("type") == "json_invalid":
                    return openai_error(400, "the body is not valid JSON")
                where = ".".join(str(part) for part in first["loc"] if part != "body")
                return openai_error(400, f"{where}: {first['msg']}" if where else first["msg"])
            except HTTPException as exc:  # a body FastAPI cannot read ("There was an error parsing the body")
                return openai_error(exc.status_code, str(exc.detail), exc.headers)

        return openai_errors


router = APIRouter(
    route_class=OpenAIErrors,
    responses=error_responses(*AUTHENTICATED, 400, 404, 409, 413, 501, 502, 504, model=OpenAIErrorReply),
)


@router.post("/v1/chat/completions")
async def chat(body: ChatRequest, question: ChatQuestion, slot: ChatSlot, service: ServiceDep):
    if body.stream:
        events = service.events(
            question.pipe, question.name, question.text, None, slot, question.principal, history=question.history
        )
        return EventSourceResponse(chat_stream(events, question.name), ping=15, background=BackgroundTask(slot.release))
    try:
        result = await service.ask(
            question.pipe, question.name, question.text, None, question.principal, history=question.history
        )
    finally:
        slot.release()
    return chat_completion(result, question.name)
