"""The one search entry point (nodes/search.py): `Pipeline.search` and the LangChain retriever return the same
passages for the same query and config, with the config's rewrite applied as `ask` applies it (over the sample index
and the real embedding model)."""

from __future__ import annotations

import json

import pytest

from switchyard.configs.loader import config_to_dict
from switchyard.graphs.langchain_retriever import SwitchyardRetriever
from switchyard.nodes.search import search_json, search_passages
from switchyard.retrievers.search import Retrieval
from switchyard.run_context import ALL, RunContext
from tests.nodes.scripted import scripted_llm

QUESTION = "What is the standard track gauge?"
REWRITTEN = "knuckle coupler patent Janney"  # far from the question: a rewrite that was searched shows


@pytest.fixture
def searched(monkeypatch):
    """The queries of every call of the one retrieval path, in order."""
    seen: list[list[str]] = []
    real = Retrieval.run

    def spy(self, queries, where=None, top_k=None, run=None):
        seen.append(list(queries))
        return real(self, queries, where, top_k, run=run)

    monkeypatch.setattr(Retrieval, "run", spy)
    return seen


def ranked(passages) -> list[tuple[str, float]]:
    return [(p.chunk_id, round(p.score, 6)) for p in passages]


def documents(docs) -> list[tuple[str, float]]:
    return [(d.metadata["chunk_id"], round(d.metadata["score"], 6)) for d in docs]


def test_prf_rewrite_same_passages_from_pipeline_and_retriever(make_pipeline, searched):
    pipe = make_pipeline("rewrite.method=prf", llm=scripted_llm()[0])
    from_pipeline = ranked(pipe.search(QUESTION).passages)
    pipeline_queries = list(searched)
    searched.clear()
    docs = SwitchyardRetriever.from_pipeline(pipe).invoke(QUESTION)
    assert documents(docs) == from_pipeline and len(from_pipeline) == pipe.config.rerank.top_k
    # both ran the PRF feedback search, then the expanded query (not the bare question)
    assert searched == pipeline_queries and len(searched) == 2 and searched[0] == [QUESTION]
    assert searched[1][0].startswith(QUESTION) and searched[1][0] != QUESTION
    # PRF needs no LLM: a retriever on the bare stack rewrites the same way
    searched.clear()
    assert documents(SwitchyardRetriever(stack=pipe.resources.stack).invoke(QUESTION)) == from_pipeline
    assert searched == pipeline_queries
    # and the rewrite matters: the bare question alone ranks otherwise
    assert ranked(pipe.resources.stack.search(QUESTION, groups=ALL).candidates) != ranked(
        pipe.resources.stack.retrieval.search(QUESTION, pipeline_queries[1], run=RunContext()).candidates
    )


def test_llm_rewrite_same_passages_and_one_llm_call_per_search(make_pipeline, searched):
    llm, backend = scripted_llm(rewrite=json.dumps({"query": REWRITTEN}))
    pipe = make_pipeline("rewrite.method=llm", llm=llm)
    from_pipeline = ranked(pipe.search(QUESTION).passages)
    assert len(backend.calls) == 1 and backend.calls[0][-1]["content"] == QUESTION
    retriever = SwitchyardRetriever.from_pipeline(pipe)
    assert retriever.llm is llm
    docs = retriever.invoke(QUESTION)
    assert len(backend.calls) == 2  # one LLM call for this search too
    assert documents(docs) == from_pipeline
    # both searched the question and the model's query, fused
    assert searched == [[QUESTION, REWRITTEN], [QUESTION, REWRITTEN]]
    assert any("couplers" in p.doc_id for p in pipe.search(QUESTION).passages)  # the rewrite's passages are in
    assert len(backend.calls) == 3
    # top_k and the filter of the call apply as in Pipeline.search
    assert documents(retriever.invoke(QUESTION, where="source~couplers", top_k=3)) == ranked(
        pipe.search(QUESTION, where="source~couplers", top_k=3).passages
    )
    assert len(backend.calls) == 5


def test_llm_rewrite_without_an_llm_searches_the_question_as_is(make_pipeline, searched):
    llm, backend = scripted_llm(rewrite=json.dumps({"query": REWRITTEN}))
    pipe = make_pipeline("rewrite.method=llm", llm=llm)
    stack = pipe.resources.stack
    docs = SwitchyardRetriever(stack=stack).invoke(QUESTION)
    assert documents(docs) == ranked(stack.search(QUESTION, groups=ALL).passages)
    assert backend.calls == [] and searched == [[QUESTION], [QUESTION]]


def test_rewrite_none_and_the_access_groups(make_pipeline, searched):
    pipe = make_pipeline("rewrite.method=none", llm=scripted_llm()[0])
    result = search_passages(QUESTION, stack=pipe.resources.stack, where="source~couplers", top_k=2, groups=())
    assert ranked(result.passages) == ranked(pipe.search(QUESTION, "source~couplers", 2, groups=()).passages)
    assert searched == [[QUESTION], [QUESTION]]
    assert result.passages and all("couplers" in p.doc_id for p in result.passages)
    unranked = search_passages(QUESTION, stack=pipe.resources.stack, rerank=False, top_k=3, groups=ALL)
    assert ranked(unranked.passages) == ranked(unranked.candidates[:3])


def test_search_json_is_the_cli_search_object(make_pipeline):
    pipe = make_pipeline("rewrite.method=none", llm=scripted_llm()[0])
    stack = pipe.resources.stack
    result = pipe.search(QUESTION, top_k=2)
    out = search_json(QUESTION, result, stack)
    assert list(out) == ["query", "collection", "results", "timings_ms", "config"]
    assert out["query"] == QUESTION and out["collection"] == stack.collection == "default"
    assert out["results"] == [p.to_dict() for p in result.passages] and len(out["results"]) == 2
    assert set(out["timings_ms"]) == {"retrieve", "rerank"} and out["config"] == config_to_dict(pipe.config)
    assert json.loads(json.dumps(out)) == out
