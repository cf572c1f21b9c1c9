"""The `Depends` providers the routes share, each written once: the service, the caller (`Principal`), the question
a run is asked (checked, its pipeline resolved over a collection the caller may read), the store of a collection,
and the run slot. A route names what it needs by type (`AskQuestion`, `AskSlot`, `CollectionStore`, ...) and
starts where they end.

The order of the checks is the order of the replies a client sees: the body (422), the question (400, 413), the
pipeline (404) and collection (400, 404), a stream's readiness (400), then a place among the runs in flight (429).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from switchyard.conversation import Message, as_history, split_last_question
from switchyard.errors import ServiceError, UsageError
from switchyard.graphs.pipeline import Pipeline
from switchyard.retrievers.store import IndexStore
from switchyard.service.access import valid_collection_name
from switchyard.service.audit import note
from switchyard.service.auth import principal_of
from switchyard.service.core import Service, Slot
from switchyard.service.error_responses import run_error
from switchyard.service.keys import Principal
from switchyard.service.openai_compat import ChatRequest
from switchyard.service.schemas import AskRequest, SearchRequest


def get_service(request: Request) -> Service:
    return request.app.state.service


def get_principal(request: Request) -> Principal:
    """Who is asking: what the auth recorded (LOCAL when the server runs open)."""
    return principal_of(request)


ServiceDep = Annotated[Service, Depends(get_service)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require_admin(principal: Principal, what: str) -> None:
    if not principal.admin:
        raise ServiceError(403, f"{what} needs an admin key")


def require_write(principal: Principal, collection: str) -> None:
    if not principal.can_write(collection):
        raise ServiceError(403, f"key {principal.name!r} may not change collection {collection!r} (needs --write)")


def readable_pipeline(
    service: Service, principal: Principal, pipeline: str | None, collection: str | None, create: bool = False
) -> tuple[Pipeline, str]:
    """The named pipeline (default: the first) over `collection` (default: the pipeline's own) if `principal` may
    read it, and its name. A collection that does not exist is a 404 unless `create` (an upload): pipelines are
    kept per collection, so a client cannot make the server build one for any name it likes. A collection the
    principal may not read is the same 404 as one that does not exist."""
    access = service.access
    name = access.pipeline_name(pipeline)
    given = collection is not None
    collection = valid_collection_name(collection or access.own_collection(name))
    access.check(principal, collection, must_exist=not create and (given or principal.restricted))
    return service.registry.get(name, collection), name


def existing_store(service: Service, principal: Principal, collection: str) -> IndexStore:
    """The store of an existing collection `principal` may read (404 otherwise)."""
    store = readable_pipeline(service, principal, None, collection)[0].resources.stack.store
    if not store.exists():
        raise service.access.missing(principal, collection)
    return store


@dataclass(frozen=True)
class Question:
    """A checked question (or search query) and the pipeline, over a readable collection, that answers it."""

    text: str
    where: str | None
    pipe: Pipeline
    name: str  # the pipeline's name
    principal: Principal
    history: list[Message] = field(default_factory=list)  # a conversation's earlier turns, as given
    thread_id: str | None = None  # a conversation the server keeps (the principal's)


def readable_question(
    request: Request,
    service: Service,
    principal: Principal,
    text: str,
    pipeline: str | None,
    collection: str | None,
    where: str | None,
    *,
    what: str = "question",
    unattended: bool = False,
    messages: list | None = None,
    thread_id: str | None = None,
) -> Question:
    """The preamble of every run: the audit note, the question's checks, the readable pipeline; `unattended` (a
    stream, the chat endpoint): a question its pipeline can start on now, and a pipeline that does not pause for
    a human's approval."""
    note(request, collection, text)
    service.check_question(text, what)
    pipe, name = readable_pipeline(service, principal, pipeline, collection)
    note(request, pipe.resources.stack.collection)
    if unattended:
        try:  # the caller's errors (empty or missing collection) as a 4xx before the stream starts
            pipe.checked_question(text)
        except Exception as exc:
            raise run_error(exc) from None
        if pipe.pauses:
            raise UsageError(
                f"pipeline {name!r} pauses for a human's approval before each action "
                "(graph.router.approve): ask with POST /v1/ask, answer with "
                "POST /v1/threads/{thread_id}/resume"
            )
    history = as_history(messages)  # HistoryError (400) before any run
    service.check_history(history)
    if thread_id is not None:
        # the caller's own thread or a new one: another key's is a 404, an expired one a 410, before any run
        pipe.turn(text, messages, thread_id, principal.name)
    return Question(text, where, pipe, name, principal, history, thread_id)


def _asked(body: AskRequest, request: Request, service: Service, principal: Principal, unattended: bool) -> Question:
    return readable_question(
        request,
        service,
        principal,
        body.question,
        body.pipeline,
        body.collection,
        body.where,
        unattended=unattended,
        messages=body.messages,
        thread_id=body.thread_id,
    )


def ask_question(body: AskRequest, request: Request, service: ServiceDep, principal: PrincipalDep) -> Question:
    return _asked(body, request, service, principal, unattended=False)


def stream_question(body: AskRequest, request: Request, service: ServiceDep, principal: PrincipalDep) -> Question:
    return _asked(body, request, service, principal, unattended=True)


def chat_question(body: ChatRequest, request: Request, service: ServiceDep, principal: PrincipalDep) -> Question:
    history, question = split_last_question(m.model_dump() for m in body.messages)  # the whole conversation
    return readable_question(
        request, service, principal, question, body.model, body.collection, None, unattended=True, messages=history
    )


def search_question(body: SearchRequest, request: Request, service: ServiceDep, principal: PrincipalDep) -> Question:
    return readable_question(
        request, service, principal, body.query, body.pipeline, body.collection, body.where, what="query"
    )


AskQuestion = Annotated[Question, Depends(ask_question)]
StreamQuestion = Annotated[Question, Depends(stream_question)]
ChatQuestion = Annotated[Question, Depends(chat_question)]
SearchQuestion = Annotated[Question, Depends(search_question)]


def reply_slot(question_provider):
    """The run slot of a route that replies once its run is done: taken after the question's checks (429 beyond
    the limits), given back when the route returns, before its reply is sent (the client's next request finds it
    free)."""

    async def slot(service: ServiceDep, question: Question = Depends(question_provider)) -> AsyncIterator[Slot]:
        taken = service.acquire(question.principal)
        try:
            yield taken
        finally:
            taken.release()

    return Depends(slot, scope="function")


def stream_slot(question_provider):
    """The run slot of a route that streams: taken after the question's checks (429 beyond the limits); the route
    hands it to its stream, which gives it back when the stream ends or its client goes away, and to its response
    (`background=BackgroundTask(slot.release)`) for a client that left before the stream began."""

    async def slot(service: ServiceDep, question: Question = Depends(question_provider)) -> Slot:
        return service.acquire(question.principal)

    return Depends(slot)


AskSlot = Annotated[Slot, reply_slot(ask_question)]
SearchSlot = Annotated[Slot, reply_slot(search_question)]
StreamSlot = Annotated[Slot, stream_slot(stream_question)]
ChatSlot = Annotated[Slot, stream_slot(chat_question)]


def collection_store(name: str, request: Request, service: ServiceDep, principal: PrincipalDep) -> IndexStore:
    note(request, name)
    return existing_store(service, principal, name)


CollectionStore = Annotated[IndexStore, Depends(collection_store)]
