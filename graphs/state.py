"""The graph state: one object carries a run. Nodes return partial updates; `query_history` and `trace` append."""

from __future__ import annotations

import operator
from typing import Annotated, Literal

from typing_extensions import TypedDict  # on Python < 3.12, LangGraph Server's schemas need this TypedDict

from switchyard.retrievers.documents import Passage

Verdict = Literal["correct", "ambiguous", "incorrect"]


class TraceEntry(TypedDict, total=False):
    node: str
    ms: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    input: dict
    output: dict


def add_usage(total: dict | None, step: dict | None) -> dict:
    """Reducer: usage totals are the sum of every node's usage."""
    out = dict(total or {})
    for key, value in (step or {}).items():
        out[key] = round(out.get(key, 0) + value, 2)
    return out


class RAGState(TypedDict, total=False):
    question: str  # as asked (in a conversation: the last user message)
    history: list[dict]  # a conversation's earlier turns, {role, content}, oldest first (switchyard.conversation)
    standalone: str  # contextualize: the question with what the conversation adds, as retrieval and grading read it
    context_queries: list[str]  # contextualize: further queries the first round searches and fuses
    standalone_given: str  # conversation.method given: the caller's standalone question (a human rewrite)
    where: str | None  # metadata filter for retrieval
    query: str  # the current main retrieval query
    queries: list[str]  # every query of the current round (searched and fused)
    query_history: Annotated[list[str], operator.add]
    candidates: list[Passage]  # fused passages with every score
    retrieved: Annotated[list[str], operator.add]  # doc ids of every retrieval round, in rank order
    reranked: list[Passage]
    graded: list[Passage]  # passages kept by the corrective check
    verdict: Verdict
    attempts: int  # retrieval rounds graded so far
    feedback: str  # what the last grading learnt, for the next rewrite
    answer: str
    short_answer: str  # answer.format short: the grounded short answer ("" when not shown)
    evidence: str  # answer.format short: the cited evidence sentences
    grounding: dict  # answer.format short: status, shown, how, source, proposed
    abstained: bool
    citations: list[dict]
    citation_check: dict
    trace: Annotated[list[TraceEntry], operator.add]
    usage: Annotated[dict, add_usage]  # llm_calls, prompt_tokens, completion_tokens, llm_ms, total_ms
    # agent mode
    last_action: str  # the last node that ran (the fixed pipeline's next edge follows it)
    step_count: int  # router decisions so far
    next_action: str
    action_args: dict
    decision: dict  # the router's last decision (thought, action, args, guard, cost)
    plan: list[str]  # plan, plan-react: the remaining planned actions
    memory: list[str]  # autogpt: the working memory (facts the agent wrote), bounded
    executed: Annotated[list, operator.add]  # (action, args) of every executed step, for the repeat guard
    agent_steps: Annotated[list[dict], operator.add]  # one machine-readable record per step
    approved: bool  # graph.router.approve: the human let the pending action run
