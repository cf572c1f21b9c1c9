"""`POST /v1/search`: the ranked passages `switchyard search --json` prints (what `ask` retrieves in its first round),
with the same filters, access rules and collection permissions as `/v1/ask`. It holds a run slot like a run: a
pipeline whose rewrite asks the LLM makes one LLM call per search."""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from switchyard.nodes.search import search_json
from switchyard.service.dependencies import SearchQuestion, SearchSlot
from switchyard.service.schemas import AUTHENTICATED, SearchReply, SearchRequest, error_responses

router = APIRouter(responses=error_responses(*AUTHENTICATED, 400, 404, 409, 413, 501))


@router.post("/v1/search", response_model=SearchReply)
async def search(body: SearchRequest, question: SearchQuestion, _slot: SearchSlot) -> dict:
    pipe = question.pipe

    def run():
        return pipe.search(question.text, where=question.where, top_k=body.k, groups=question.principal.scope)

    result = await anyio.to_thread.run_sync(run)
    return search_json(question.text, result, pipe.resources.stack)
