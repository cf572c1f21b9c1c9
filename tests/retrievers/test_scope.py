"""Closed by default: every read, count, listing and delete of the index takes the caller's access scope (its groups,
or the explicit `ALL`); a missing scope is an AccessError, never read as "everything"."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from switchyard.errors import AccessError
from switchyard.retrievers.filters import encode_labels
from switchyard.retrievers.store import IndexStore
from switchyard.run_context import ALL, AllScope, RunContext
from tests.retrievers.helpers import make_chunk, unit


@pytest.fixture
def labelled_store(tmp_path):
    """Three documents: one unlabelled, one labelled hr, one labelled finance."""
    store = IndexStore(str(tmp_path / "ix"), "c", dim=3)
    chunks = [
        make_chunk("open::0", "the canteen opens at noon"),
        dataclasses.replace(make_chunk("pay::0", "payroll runs on the 25th"), acl=encode_labels(["hr"])),
        dataclasses.replace(make_chunk("bud::0", "the budget is frozen"), acl=encode_labels(["finance"])),
    ]
    store.write_documents(["open", "pay", "bud"], chunks, np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)]))
    return store


def doc_ids(docs) -> set[str]:
    return {d["doc_id"] for d in docs}


class TestTheStoreRefusesAMissingScope:
    def test_a_call_without_a_scope_is_refused_not_widened(self, labelled_store):
        store = labelled_store
        calls = {
            "count": lambda **kw: store.count(**kw),
            "scan": lambda **kw: store.scan(["doc_id"], **kw),
            "list_documents": lambda **kw: store.list_documents(**kw),
            "document_chunks": lambda **kw: store.document_chunks("pay", **kw),
            "delete_documents": lambda **kw: store.delete_documents(["pay", "bud"], **kw),
        }
        for _name, call in calls.items():
            with pytest.raises(AccessError, match="no access scope"):
                call()
            with pytest.raises(AccessError, match="no access scope"):
                call(scope=None)
        # nothing was deleted by the refused calls
        assert store.count(ALL) == 3 and doc_ids(store.list_documents(ALL)) == {"open", "pay", "bud"}

    def test_a_string_is_no_scope(self, labelled_store):
        with pytest.raises(AccessError, match="not the string"):
            labelled_store.count("hr")

    def test_all_reads_everything(self, labelled_store):
        store = labelled_store
        assert store.count(ALL) == 3
        assert set(store.scan(["doc_id"], scope=ALL)["doc_id"].to_pylist()) == {"open", "pay", "bud"}
        assert [p.doc_id for p in store.document_chunks("pay", ALL)] == ["pay"]

    def test_a_group_scope_hides_labelled_documents(self, labelled_store):
        store = labelled_store
        assert store.count(()) == 1 and doc_ids(store.list_documents(())) == {"open"}
        assert store.count(("hr",)) == 2 and doc_ids(store.list_documents(("hr",))) == {"open", "pay"}
        assert store.document_chunks("pay", ("finance",)) == []
        assert set(store.scan(["doc_id"], scope=("finance",))["doc_id"].to_pylist()) == {"open", "bud"}
        assert store.delete_documents(["pay", "bud"], ("finance",)) == 1  # only what finance may read
        assert doc_ids(store.list_documents(ALL)) == {"open", "pay"}

    def test_all_deletes_everything_asked_for(self, labelled_store):
        assert labelled_store.delete_documents(["pay", "bud"], ALL) == 2
        assert labelled_store.count(ALL) == 1


class TestRetrievalRefusesAMissingScope:
    def test_retrieval_and_stack_search_need_a_scope(self, make_stack, tmp_path):
        (tmp_path / "memo.md").write_text("# Memo\n\nThe vault combination is kept by payroll.\n", encoding="utf-8")
        (tmp_path / "note.md").write_text("# Note\n\nThe vault in the office is painted green.\n", encoding="utf-8")
        stack = make_stack()
        stack.ingestor(progress=False).run([tmp_path / "note.md"])
        stack.ingestor(progress=False).run([tmp_path / "memo.md"], acl="hr")
        with pytest.raises(AccessError, match="no access scope"):
            stack.search("vault combination")
        with pytest.raises(AccessError, match="no access scope"):
            stack.search("vault combination", groups=None)
        with pytest.raises(AccessError, match="no access scope"):
            stack.retrieval.run(["vault combination"])
        with pytest.raises(AccessError, match="no access scope"):
            stack.retrieval.search("vault combination", run=RunContext(groups=None))
        everything = {p.title for p in stack.search("vault combination", groups=ALL).passages}
        assert everything == {"Memo", "Note"}
        assert {p.title for p in stack.retrieval.run(["vault combination"], run=RunContext())} == everything
        assert {p.title for p in stack.search("vault combination", groups=()).passages} == {"Note"}
        assert {p.title for p in stack.search("vault combination", groups=("hr",)).passages} == everything


class TestAll:
    def test_all_is_one_value_that_survives_pickling(self):
        assert AllScope() is ALL and repr(ALL) == "ALL"
        assert pickle.loads(pickle.dumps(ALL)) is ALL
        assert pickle.loads(pickle.dumps({"groups": ALL}, protocol=2))["groups"] is ALL
        assert copy.deepcopy(ALL) is ALL and copy.copy(ALL) is ALL

    def test_run_context_defaults_to_all(self):
        assert RunContext().groups is ALL and RunContext(groups=("hr",)).groups == ("hr",)

    @pytest.mark.slow
    def test_all_survives_a_ray_task(self, ray_cluster):
        """A task on the cluster gets ALL as its own ALL, and its reply comes back as this process's ALL (a
        subprocess is the driver: this test process never imports Ray)."""
        script = textwrap.dedent(f"""
            import ray
            from switchyard.run_context import ALL, RunContext

            ray.init(address="{ray_cluster.address}", log_to_driver=False)

            @ray.remote
            def check(scope, groups):
                from switchyard.run_context import ALL
                return scope is ALL, groups is ALL, scope

            same, in_context, back = ray.get(check.remote(ALL, RunContext().groups))
            print(same, in_context, back is ALL)
        """)
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[-3:] == ["True", "True", "True"]
