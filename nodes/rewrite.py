"""rewrite: turn the question (and, on a retry, what the last round learnt) into retrieval queries.

Methods: `llm` (the model writes one or more search queries), `prf` (pseudo-relevance feedback: frequent
distinctive terms of the top passages are added to the question, no LLM), `none` (the question as is).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Annotated

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, StringConstraints

from switchyard.configs.schema import RewriteConfig
from switchyard.llm.client import LLM
from switchyard.llm.prompts import REWRITE_FEEDBACK, REWRITE_MANY, REWRITE_ONE
from switchyard.nodes.contextualize import search_text
from switchyard.nodes.resources import Resources
from switchyard.retrievers.bm25 import content_tokenizer
from switchyard.retrievers.search import Retrieval, Where
from switchyard.run_context import RunContext
from switchyard.stop_words import ENGLISH_STOP_WORDS

Query = Annotated[str, StringConstraints(min_length=2, max_length=160)]


class RewrittenQuery(BaseModel):
    query: Query


class RewrittenQueries(BaseModel):
    queries: list[Query] = Field(min_length=1, max_length=5)


def _dedupe(queries: list[str]) -> list[str]:
    seen, out = set(), []
    for q in queries:
        q = " ".join(q.split())
        if q and q.lower() not in seen:
            seen.add(q.lower())
            out.append(q)
    return out


def _keywords(text: str) -> str:
    words = [w for w in text.replace("?", " ").split() if w.lower().strip(".,;:!") not in ENGLISH_STOP_WORDS]
    return " ".join(words) or text


def prf_expand(question: str, passages_text: list[str], n_terms: int) -> str:
    """Add the `n_terms` most frequent non-stop-word terms of the feedback passages that the question lacks."""
    tok = content_tokenizer()
    have = set(tok(question))
    counts: Counter[str] = Counter()
    for text in passages_text:
        counts.update({t for t in tok(text) if len(t) > 2 and not t.isdigit()})  # document frequency
    # ties by term, not by set order: that varies between processes (string hashing is randomised)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    extra = [t for t, _ in ranked if t not in have][:n_terms]
    return f"{question} {' '.join(extra)}".strip()


def rewrite(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    attempts = state.get("attempts", 0)
    queries = round_queries(
        search_text(state),
        attempts,
        state.get("feedback"),
        state.get("where"),
        res,
        runtime.context,
        state.get("context_queries", ()),
    )
    return {"queries": queries, "query": queries[0], "query_history": queries}


def round_queries(
    question: str,
    attempts: int,
    feedback: str | None,
    where: Where,
    res: Resources,
    run: RunContext | None = None,
    turn_queries: Sequence[str] = (),
) -> list[str]:
    """The retrieval queries of a round (`attempts` rounds graded before it) under the configured method, with the
    pipeline's own stack and LLM (`rewrite_queries`)."""
    cfg = res.config.rewrite
    # only PRF reads the index here: the other methods build no retrieval stack
    return rewrite_queries(
        question,
        attempts,
        feedback,
        where,
        config=cfg,
        retrieval=res.stack.retrieval if cfg.method == "prf" else None,
        get_llm=lambda: res.llm,
        run=run,
        turn_queries=turn_queries,
    )


def rewrite_queries(
    question: str,
    attempts: int,
    feedback: str | None,
    where: Where,
    *,
    config: RewriteConfig,
    retrieval: Retrieval | None,
    get_llm: Callable[[], LLM] | None,
    run: RunContext | None = None,
    turn_queries: Sequence[str] = (),
) -> list[str]:
    """The retrieval queries of a round (`attempts` rounds graded before it) under the `config` method; PRF
    searches with the run's filter, through the one retrieval path (`retrieval`, needed by PRF only). The `llm`
    method calls `get_llm()` once for its one structured call; without `get_llm` it keeps the question as is, as
    it does when the model's reply is unusable. `turn_queries`, what a conversation's history step adds beside the
    standalone question (nodes/contextualize.py), are searched too in the first round."""
    cfg = config
    if cfg.method == "none":
        queries = [question] if attempts == 0 else [_keywords(question)]
    elif cfg.method == "prf":
        if attempts == 0:
            if retrieval is None:
                raise ValueError("rewrite.method=prf needs the retrieval path")
            top = retrieval.run([question], where=where, top_k=cfg.prf_passages, run=run)
            queries = [prf_expand(question, [p.text for p in top], cfg.prf_terms)]
        else:  # the expanded query failed: fall back to the bare keywords
            queries = [_keywords(question)]
    elif get_llm is None:
        queries = [question] if attempts == 0 else [_keywords(question)]
    else:
        llm = get_llm()
        n = cfg.num_queries
        prompt = REWRITE_ONE if n == 1 else REWRITE_MANY.format(n=n)
        if attempts and feedback:
            prompt += REWRITE_FEEDBACK.format(feedback=feedback)
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": question}]
        # fallbacks are built unvalidated: the length limits are for the model's queries, not the user's question
        if n == 1:
            result = llm.structured(
                messages,
                RewrittenQuery,
                fallback=RewrittenQuery.model_construct(query=question),
                max_tokens=64,
                run=run,
            )
            generated = [result.value.query]
        else:
            results = llm.structured(
                messages,
                RewrittenQueries,
                fallback=RewrittenQueries.model_construct(queries=[question]),
                max_tokens=48 * n,
                run=run,
            )
            generated = list(results.value.queries)[:n]
        # the first round also searches the question itself: a weak model's rewrite must not lose it
        queries = _dedupe(([question] if attempts == 0 else []) + generated) or [question]
    return _dedupe(queries + (list(turn_queries) if attempts == 0 else []))
