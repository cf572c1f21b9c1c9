"""search: the one entry point for callers that search without answering (`Pipeline.search`, `switchyard search`, the
MCP search tool, the HTTP service, the LangChain retriever). It returns what `ask` retrieves in its first round:
the config's rewrite (nodes/rewrite.py, as the rewrite node runs it: PRF with the filter, an LLM rewrite with one
LLM call), the one retrieval path (retrievers/search.py), then the configured reranker.

    result = search_passages(question, stack=stack, get_llm=lambda: llm, where="source~handbook", top_k=5)
    print(json.dumps(search_json(question, result, stack), indent=2))   # `switchyard search --json`
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from switchyard.configs.loader import config_to_dict
from switchyard.conversation import Message
from switchyard.llm.client import LLM
from switchyard.nodes.contextualize import standalone_question
from switchyard.nodes.rewrite import rewrite_queries
from switchyard.retrievers.search import SearchResult, Where
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import RunContext, Scope


def search_passages(
    question: str,
    *,
    stack: RetrievalStack,
    groups: Scope | None,
    get_llm: Callable[[], LLM] | None = None,
    where: Where = None,
    top_k: int | None = None,
    rerank: bool = True,
    history: Sequence[Message] = (),
) -> SearchResult:
    """The passages `question` retrieves in `ask`'s first round under `stack.config`: its rewrite's queries, the
    one retrieval path with `where` and the caller's scope `groups` (its access groups, or `ALL`; required: None is
    refused by the retrieval path, never widened), then the reranker
    (`rerank=False`: the first fused candidates); `top_k` passages (default `rerank.top_k`). An LLM rewrite calls
    `get_llm()` once; without it the question is searched as is. A missing collection is a `StoreError` before any
    model is called. With `history` (a conversation's earlier turns), the question is first made standalone as the
    graph's contextualize step makes it (conversation.method)."""
    stack.store.table()
    run = RunContext(groups=groups)
    config = stack.config.rewrite
    turn = standalone_question(question, list(history), stack.config.conversation, get_llm, run)
    question = turn["standalone"]
    queries = rewrite_queries(
        question,
        0,
        None,
        where,
        config=config,
        retrieval=stack.retrieval if config.method == "prf" else None,
        get_llm=get_llm,
        run=run,
        turn_queries=turn["context_queries"],
    )
    return stack.retrieval.search(question, queries, where=where, top_k=top_k, rerank=rerank, run=run)


def search_json(query: str, result: SearchResult, stack: RetrievalStack) -> dict:
    """The JSON object of a search (`switchyard search --json`): the query, the collection, the passages, the timings
    and the resolved config."""
    return {
        "query": query,
        "collection": stack.collection,
        "results": [p.to_dict() for p in result.passages],
        "timings_ms": result.timings_ms,
        "config": config_to_dict(stack.config),
    }
