"""The one retrieval path (retrievers/search.py): every entry point reads the index through `Retrieval.run` with the
caller's filter, and `search` shows what `ask` retrieved in its first round."""

from __future__ import annotations

import asyncio
import json

import pytest

from switchyard.graphs.langchain_retriever import SwitchyardRetriever
from switchyard.retrievers.search import Retrieval
from switchyard.run_context import ALL
from tests.nodes.scripted import scripted_llm

WHERE = "source~couplers"
QUESTION = "Who patented the knuckle coupler?"
OTHER_TOPIC = "What is the standard track gauge?"  # its best passages are not in couplers.html


@pytest.fixture
def calls(monkeypatch):
    """Every call of the one retrieval path: (queries, where) as the caller passed them."""
    seen: list[tuple[list[str], object]] = []
    real = Retrieval.run

    def spy(self, queries, where=None, top_k=None, run=None):
        seen.append((list(queries), where))
        return real(self, queries, where, top_k, run=run)

    monkeypatch.setattr(Retrieval, "run", spy)
    return seen


def in_filter(doc_ids):
    return all("couplers" in d for d in doc_ids)


def first_round(pipe, question, where=None):
    """(doc_id, score) of the passages the first rerank step of a streamed `ask` kept."""
    for event in pipe.stream(question, where):
        if event.event == "passages" and event.node == "rerank":
            return [(p.doc_id, round(p.score, 6)) for p in event.passages]
    raise AssertionError("the run never reranked")


class TestSearchIsAsksFirstRound:
    @pytest.mark.parametrize("rewrite", ["llm", "prf", "none"])
    def test_same_passages_same_order(self, make_pipeline, rewrite):
        llm, _ = scripted_llm(
            rewrite=json.dumps({"query": "knuckle coupler patent"}), answer="Eli Janney patented it [1]."
        )
        pipe = make_pipeline(f"rewrite.method={rewrite}", llm=llm)
        searched = [(p.doc_id, round(p.score, 6)) for p in pipe.search(QUESTION).passages]
        assert searched and searched == first_round(pipe, QUESTION)

    @pytest.mark.slow
    def test_with_the_default_config_and_the_real_model(self, make_pipeline, local_llm):
        pipe = make_pipeline(llm=local_llm, answer_format="short")
        searched = [(p.doc_id, round(p.score, 6)) for p in pipe.search(QUESTION).passages]
        assert searched and searched == first_round(pipe, QUESTION)


class TestEveryEntryPointHonoursTheFilter:
    def test_search_and_stack_search(self, make_pipeline, calls):
        pipe = make_pipeline(llm=scripted_llm()[0])
        assert in_filter(p.doc_id for p in pipe.search(OTHER_TOPIC, where=WHERE).passages)
        assert in_filter(p.doc_id for p in pipe.resources.stack.search(OTHER_TOPIC, where=WHERE, groups=ALL).passages)
        assert calls and all(where == WHERE for _, where in calls)

    @pytest.mark.parametrize("rewrite", ["llm", "prf", "none"])
    def test_ask_stream_and_async_with_every_rewrite_method(self, make_pipeline, calls, rewrite):
        llm, _ = scripted_llm(answer="It is 1,435 mm [1].")
        pipe = make_pipeline(f"rewrite.method={rewrite}", llm=llm)
        result = pipe.ask(OTHER_TOPIC, where=WHERE)
        assert in_filter(result.retrieved_doc_ids) and in_filter(c.doc_id for c in result.citations)
        streamed = [e for e in pipe.stream(OTHER_TOPIC, WHERE) if e.event == "passages"]
        assert streamed and all(in_filter(p.doc_id for p in e.passages) for e in streamed)
        assert in_filter(asyncio.run(pipe.aask(OTHER_TOPIC, WHERE)).retrieved_doc_ids)
        # PRF's feedback search included: no call of the retrieval path went without the filter
        assert calls and all(where == WHERE for _, where in calls)

    def test_agent_retrieve_with_its_own_query(self, make_pipeline, calls):
        router = [json.dumps({"action": "retrieve", "query": "standard track gauge"}), json.dumps({"action": "answer"})]
        llm, _ = scripted_llm(router=router, answer="It is 1,435 mm [1].")
        pipe = make_pipeline("graph.mode=agent", "graph.router.strategy=zeroshot", llm=llm)
        result = pipe.ask(OTHER_TOPIC, where=WHERE)
        assert result.retrieved_doc_ids and in_filter(result.retrieved_doc_ids)
        assert calls and all(where == WHERE for _, where in calls)

    def test_langchain_retriever(self, sample_index, calls):
        retriever = SwitchyardRetriever.from_index(sample_index, where=WHERE)
        docs = retriever.invoke(OTHER_TOPIC)
        assert docs and in_filter(d.metadata["doc_id"] for d in docs)
        assert calls

    def test_cli_search(self, sample_index, request):
        from tests.conftest import fast_lane_overrides
        from tests.test_cli import cli

        replayed = [a for override in fast_lane_overrides(request.config) for a in ("--set", override)]
        done = cli(
            "search",
            OTHER_TOPIC,
            "--index-dir",
            str(sample_index),
            "--where",
            WHERE,
            "--set",
            "rewrite.method=none",
            "--json",
            *replayed,
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["results"] and in_filter(r["doc_id"] for r in out["results"])


@pytest.fixture(scope="module")
def labelled_index(tmp_path_factory, embedder):
    """The sample corpus with couplers.html labelled `staff`: a caller without that group never reads it."""
    from switchyard.configs.loader import load_config
    from switchyard.retrievers.stack import RetrievalStack
    from tests.conftest import SAMPLES

    uri = tmp_path_factory.mktemp("labelled") / "index"
    stack = RetrievalStack(load_config(None, [f"store.uri={uri}"]), embedder=embedder)
    stack.ingestor(progress=False).run([SAMPLES])
    assert stack.ingestor(progress=False).run([SAMPLES / "couplers.html"], acl="staff").updated == 1
    return uri


@pytest.fixture
def labelled_pipeline(labelled_index, embedder):
    from switchyard.configs.loader import load_config
    from switchyard.graphs.pipeline import Pipeline
    from switchyard.nodes.resources import SharedModels

    def make(*overrides: str, llm=None):
        cfg = load_config(None, [f"store.uri={labelled_index}", "answer.format=sentences", *overrides])
        models = SharedModels()
        models.provide(cfg.embedding, embedder)
        models.provide(cfg.llm, llm or scripted_llm(answer="It is so [1].")[0])
        return Pipeline(cfg, models)

    return make


def hidden(doc_ids) -> bool:
    return any("couplers" in d for d in doc_ids)


class TestEveryEntryPointHonoursAccessGroups:
    @pytest.mark.parametrize("rewrite", ["llm", "prf", "none"])
    def test_ask_stream_search_and_async_never_read_a_labelled_document(self, labelled_pipeline, rewrite):
        pipe = labelled_pipeline(f"rewrite.method={rewrite}")
        assert hidden(p.doc_id for p in pipe.search(QUESTION).passages)  # there to be found without groups
        for groups in [(), ("other",)]:
            assert not hidden(p.doc_id for p in pipe.search(QUESTION, groups=groups).passages)
            for where in (None, "source~couplers", "doc_id!=x"):
                result = pipe.ask(QUESTION, where, groups=groups)
                assert not hidden(result.retrieved_doc_ids) and not hidden(c.doc_id for c in result.citations)
                assert not hidden(p.doc_id for p in pipe.search(QUESTION, where, groups=groups).passages)
            events = list(pipe.stream(QUESTION, groups=groups))
            assert not any(hidden(p.doc_id for p in e.passages) for e in events if e.event == "passages")
            assert "Janney" not in json.dumps([e.to_json() for e in events])
            assert not hidden(asyncio.run(pipe.aask(QUESTION, groups=groups)).retrieved_doc_ids)
        assert hidden(pipe.ask(QUESTION, groups=("staff",)).retrieved_doc_ids)

    def test_agent_and_langchain_retriever(self, labelled_pipeline, labelled_index):
        router = [
            json.dumps({"action": "retrieve", "query": "knuckle coupler Janney"}),
            json.dumps({"action": "answer"}),
        ]
        llm, _ = scripted_llm(router=router, answer="It is so [1].")
        pipe = labelled_pipeline("graph.mode=agent", "graph.router.strategy=zeroshot", llm=llm)
        result = pipe.ask(QUESTION, groups=())
        assert result.retrieved_doc_ids and not hidden(result.retrieved_doc_ids)
        retriever = SwitchyardRetriever.from_index(labelled_index, groups=())
        docs = retriever.invoke(QUESTION)
        assert docs and not hidden(d.metadata["doc_id"] for d in docs)
        assert hidden(d.metadata["doc_id"] for d in SwitchyardRetriever.from_index(labelled_index).invoke(QUESTION))
