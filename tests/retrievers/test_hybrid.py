"""HybridRetriever runs its retrievers at the same time and fuses what they return."""

import contextvars
import threading

import pytest

from switchyard.retrievers.documents import Passage
from switchyard.retrievers.hybrid import HybridRetriever

RUN_ID = contextvars.ContextVar("run_id", default=None)


class _Meeting:
    """A retriever that returns only once every retriever of the query has started (a barrier): run one after the
    other, the first would wait for the second forever (here: until the barrier's timeout breaks it)."""

    def __init__(self, name: str, barrier: threading.Barrier, doc_ids: list[str]):
        self.name, self.barrier, self.doc_ids = name, barrier, doc_ids
        self.seen_run_id = None

    def run(self, query, top_k=None, where=None):
        self.seen_run_id = RUN_ID.get()
        self.barrier.wait()
        return [
            Passage(chunk_id=f"{d}#0", doc_id=d, source=f"{d}.txt", title=d, text=query, score=1.0 / (i + 1))
            for i, d in enumerate(self.doc_ids)
        ]


class _Failing:
    name = "dense"

    def run(self, query, top_k=None, where=None):
        raise RuntimeError("index unreachable")


class TestHybridRetriever:
    def test_retrievers_run_at_the_same_time_and_see_the_callers_context(self):
        barrier = threading.Barrier(2, timeout=10)
        bm25, dense = _Meeting("bm25", barrier, ["a", "b"]), _Meeting("dense", barrier, ["b", "c"])
        RUN_ID.set("run-1")
        ranked = HybridRetriever([bm25, dense]).run_each("q")
        assert list(ranked) == ["bm25", "dense"]
        assert [p.doc_id for p in ranked["dense"]] == ["b", "c"]
        assert bm25.seen_run_id == dense.seen_run_id == "run-1"

    def test_fused_result_covers_both_lists(self):
        barrier = threading.Barrier(2, timeout=10)
        fused = HybridRetriever(
            [_Meeting("bm25", barrier, ["a", "b"]), _Meeting("dense", barrier, ["b", "c"])],
            weights={"bm25": 0.5, "dense": 0.5},
            normalization="max",
        ).run("q")
        by_doc = {p.doc_id: p for p in fused}
        assert set(by_doc) == {"a", "b", "c"} and set(by_doc["b"].scores) == {"bm25", "dense", "fused"}
        # max-scaled, a passage missing from a list gets that list's lowest score (0.5): a = b = 0.75, c = 0.5
        assert [round(by_doc[d].score, 3) for d in "abc"] == [0.75, 0.75, 0.5]

    def test_an_error_in_another_thread_reaches_the_caller(self):
        with pytest.raises(RuntimeError, match="index unreachable"):
            HybridRetriever([_Meeting("bm25", threading.Barrier(1), ["a"]), _Failing()]).run("q")
