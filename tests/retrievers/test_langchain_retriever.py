"""The LangChain retriever over a real Switchyard collection (the sample corpus index, the real embedding model)."""

import threading

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from switchyard.configs.loader import load_config
from switchyard.errors import FilterError, StoreError
from switchyard.graphs.langchain_retriever import SwitchyardRetriever
from switchyard.retrievers.filters import parse_filter, to_predicate
from switchyard.retrievers.stack import RetrievalStack
from switchyard.run_context import ALL

QUESTION = "Who patented the knuckle coupler?"


@pytest.fixture
def stack(sample_index, embedder):
    return RetrievalStack(load_config(None, [f"store.uri={sample_index}"]), embedder=embedder)


def test_documents_carry_the_passages_and_their_metadata(stack):
    docs = SwitchyardRetriever(stack=stack, top_k=3).invoke(QUESTION)
    passages = stack.search(QUESTION, top_k=3, groups=ALL).passages
    assert all(isinstance(d, Document) for d in docs) and len(docs) == 3
    assert [d.metadata["chunk_id"] for d in docs] == [p.chunk_id for p in passages]
    for doc, p in zip(docs, passages):
        assert doc.page_content == p.text and doc.id == p.chunk_id
        assert {k: doc.metadata[k] for k in ("doc_id", "title", "source", "page")} == {
            "doc_id": p.doc_id,
            "title": p.title,
            "source": p.source,
            "page": p.page,
        }
        assert doc.metadata["score"] == pytest.approx(p.score)
    assert [d.metadata["score"] for d in docs] == sorted((d.metadata["score"] for d in docs), reverse=True)
    assert docs[0].metadata["title"] == "Railway couplers"  # the only passage naming the knuckle coupler


def test_both_retrievers_are_fused(stack):
    doc = SwitchyardRetriever(stack=stack, top_k=1, rerank=False).invoke(QUESTION)[0]
    candidate = stack.search(QUESTION, top_k=1, rerank=False, groups=ALL).candidates[0]
    assert doc.metadata["chunk_id"] == candidate.chunk_id and set(candidate.scores) >= {"bm25", "dense"}


def test_filters_of_the_retriever_and_of_the_call_both_apply(stack):
    retriever = SwitchyardRetriever(stack=stack, top_k=5, where="source~handbook")
    docs = retriever.invoke("safety rules on the hump")
    assert docs and all("handbook" in d.metadata["source"] for d in docs)
    narrowed = retriever.invoke("safety rules on the hump", where="page=1", top_k=2)
    matches = to_predicate(parse_filter("source~handbook and page=1"))
    assert 1 <= len(narrowed) <= 2 and all(matches(d.metadata) for d in narrowed)
    assert retriever.invoke(QUESTION, where="title=Railway couplers") == []  # handbook and couplers exclude


def test_bad_filters_and_missing_collections_are_clear_errors(stack, sample_index, embedder):
    with pytest.raises(ValueError, match="unknown filter field 'author'"):  # pydantic's ValidationError
        SwitchyardRetriever(stack=stack, where="author=me")
    with pytest.raises(FilterError, match="needs a whole number"):
        SwitchyardRetriever(stack=stack).invoke(QUESTION, where="page=two")
    missing = RetrievalStack(load_config(None, [f"store.uri={sample_index}"]), collection="nope", embedder=embedder)
    with pytest.raises(StoreError, match="collection 'nope' does not exist"):
        SwitchyardRetriever(stack=missing).invoke(QUESTION)


def test_from_index_builds_the_stack_from_config(sample_index):
    retriever = SwitchyardRetriever.from_index(sample_index, overrides=["retrieve.mode=bm25"], top_k=2)
    assert retriever.stack.config.retrieve.mode == "bm25" and retriever.stack.collection == "default"
    assert [d.metadata["title"] for d in retriever.invoke(QUESTION)][0] == "Railway couplers"


def test_composes_in_a_chain_and_serves_threads_at_once(stack):
    retriever = SwitchyardRetriever(stack=stack, top_k=2)
    chain = retriever | RunnableLambda(lambda docs: [d.metadata["doc_id"] for d in docs])
    questions = [QUESTION, "What is standard gauge?", "What does an interlocking prevent?"]
    expected = [[d.metadata["doc_id"] for d in retriever.invoke(q)] for q in questions]
    barrier = threading.Barrier(len(questions))
    got: dict[int, list[str]] = {}

    def run(i: int) -> None:
        barrier.wait(timeout=30)
        got[i] = chain.invoke(questions[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(questions))] == expected
    assert chain.batch(questions) == expected
