"""contextualize: the history-aware step. A question asked in a conversation ("What year was that?") is turned into
what retrieval and the corrective check need before rewrite runs; the graph routes a question through it only when
it comes with earlier turns (`history`), so a question alone runs as it always did.

Methods (`conversation.method`):
- `terms` (no LLM; nodes/follow_up.py): the question plus the weighted key terms of the recent user turns, and with
  `conversation.fuse` the question as asked as a second query, fused by retrieval;
- `llm`: the model condenses the conversation into one standalone question (schema-constrained, one call); a reply
  that does not parse, or that drops every content word of the question and the conversation, falls back to `terms`;
- `given`: the standalone question the caller gave (`Pipeline.ask(..., standalone=...)`, e.g. a dataset's human
  rewrite: the evaluation's ceiling), with the question as asked fused by `fuse`; `terms` when none was given;
- `off`: the question alone (the node is then not in the graph).

It writes `standalone` (the text retrieval, grading and the router read; in the trace, the stream, `--json` and eval
rows) and `context_queries` (what the first round searches besides it).
"""

from __future__ import annotations

from typing import Annotated

from langgraph.runtime import Runtime
from pydantic import BaseModel, StringConstraints

from switchyard.configs.schema import ConversationConfig
from switchyard.conversation import Message, as_history
from switchyard.llm.client import LLM
from switchyard.llm.prompts import CONDENSE_SYSTEM
from switchyard.nodes.follow_up import follow_up_queries
from switchyard.nodes.resources import Resources
from switchyard.retrievers.bm25 import content_tokenizer
from switchyard.run_context import RunContext

CONDENSE_TURNS_CHARS = 600  # of each earlier message shown to the condensing model: its gist, not a whole answer


class Condensed(BaseModel):
    question: Annotated[str, StringConstraints(min_length=3, max_length=300)]


def contextualize(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    history = as_history(state.get("history"))
    return standalone_question(
        state["question"],
        history,
        res.config.conversation,
        lambda: res.llm,
        runtime.context,
        given=state.get("standalone_given"),
    )


def standalone_question(
    question: str,
    history: list[Message],
    config: ConversationConfig,
    get_llm=None,
    run: RunContext | None = None,
    given: str | None = None,
) -> dict:
    """`{"standalone": ..., "context_queries": [...]}` for `question` after `history` under `config.method`
    (`get_llm()` is called for `llm` only; `given`, the caller's standalone question, is used by `given` only).
    Without history, or with `off`, the question itself; `terms` whenever the method has nothing better."""
    if not history or config.method == "off":
        return {"standalone": question, "context_queries": []}
    made = given if config.method == "given" else None
    if config.method == "llm" and get_llm is not None:
        made = _condense(question, history, config, get_llm(), run)
    if made:  # searched with the question as asked beside it (`fuse`), as `terms` does
        extra = [question] if config.fuse and made.lower() != question.lower() else []
        return {"standalone": made, "context_queries": extra}
    queries = follow_up_queries(question, history, config)
    return {"standalone": queries[0], "context_queries": queries[1:]}


def condense_messages(question: str, history: list[Message], config: ConversationConfig) -> list[dict]:
    lines = [f"{'User' if m.role == 'user' else 'Assistant'}: {gist(m.content)}" for m in history[-2 * config.turns :]]
    return [
        {"role": "system", "content": CONDENSE_SYSTEM},
        {"role": "user", "content": "Conversation:\n" + "\n".join(lines) + f"\n\nLast question: {question}"},
    ]


def gist(text: str) -> str:
    """An earlier message as the history-aware steps show it: its first CONDENSE_TURNS_CHARS characters, whole words."""
    text = " ".join(text.split())
    return text if len(text) <= CONDENSE_TURNS_CHARS else text[:CONDENSE_TURNS_CHARS].rsplit(" ", 1)[0] + " …"


def _condense(
    question: str, history: list[Message], config: ConversationConfig, llm: LLM, run: RunContext | None
) -> str | None:
    result = llm.structured(
        condense_messages(question, history, config),
        Condensed,
        fallback=Condensed.model_construct(question=""),
        max_tokens=96,
        run=run,
    )
    condensed = " ".join(result.value.question.split())
    words = content_tokenizer()
    known = set(words(question)) | {w for m in history for w in words(m.content)}
    # a reply about nothing the conversation said (a weak model's invention) is not trusted over the terms
    if not condensed or not set(words(condensed)) & known:
        return None
    return condensed


ROUTER_TURN_CHARS = 200  # of each earlier message the agent's router is shown


def question_lines(state: dict) -> list[str]:
    """The question as an agent's router reads it: alone, `Question: ...` as always; in a conversation, the last
    earlier exchange (each message clipped), the question as asked and the standalone question retrieval reads."""
    history = state.get("history") or []
    if not history:
        return [f"Question: {state['question']}"]
    earlier = " / ".join(f"{m['role']}: {gist(m['content'])[:ROUTER_TURN_CHARS]}" for m in history[-2:])
    return [
        f"Conversation so far: {earlier}",
        f"Question: {state['question']}",
        f"Standalone question: {search_text(state)}",
    ]


def search_text(state: dict) -> str:
    """What retrieval, the corrective check, the reranker and the router read as the question: the standalone
    question of a conversation's turn, else the question as asked."""
    return state.get("standalone") or state["question"]
