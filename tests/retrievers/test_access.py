"""Document-level access labels: stored in the `acl` column, applied inside the LanceDB queries (so top-k is filled
with readable chunks), never widened by a caller's filter, and indexes made before the column existed still work."""

from __future__ import annotations

import json

import pytest

from switchyard.errors import AccessError, FilterError
from switchyard.retrievers.filters import encode_labels, parse_filter, parse_labels, readable_by, to_predicate, to_sql
from switchyard.retrievers.store import ACL_FIELD
from switchyard.run_context import ALL

SECRET = "The vault combination is 4711 and the payroll ledger sits in room 12."


def corpus(tmp_path, n_secret: int = 6):
    """Many labelled documents that match 'vault combination payroll' better than the one unlabelled document."""
    records = [
        {"_id": f"secret-{i}", "title": f"Vault memo {i}", "text": f"{SECRET} Memo number {i}.", "acl": ["hr"]}
        for i in range(n_secret)
    ]
    records.append({"_id": "finance-1", "title": "Vault budget", "text": f"{SECRET} Budget copy.", "acl": "finance"})
    records.append(
        {
            "_id": "public-1",
            "title": "Office notes",
            "text": "The office vault is painted green. Payroll questions go to the front desk.",
        }
    )
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return path


class TestLabelsAndFilters:
    def test_labels_parse_and_encode(self):
        assert parse_labels("hr, finance,hr") == ("finance", "hr")
        assert encode_labels(["hr", "finance"]) == ",finance,hr,"
        assert encode_labels([]) is None
        for bad in ("h r", "a,b'c", "%", "x" * 65):
            with pytest.raises(AccessError):
                parse_labels(bad)

    @pytest.mark.parametrize("trick", ["acl=hr", "acl~hr", "acl!=x", "page=1 and acl=hr", "1=1"])
    def test_a_filter_cannot_name_the_acl_column(self, trick):
        with pytest.raises(FilterError):
            parse_filter(trick)

    def test_an_or_trick_stays_a_literal_anded_after_the_access_clause(self):
        assert parse_filter("doc_id=a or acl=hr")[0].value == "a or acl=hr"  # one literal value
        clauses = parse_filter("source=x' OR '1'='1") + [readable_by(["hr"])]
        sql = to_sql(clauses)
        assert sql.startswith("source = 'x'' OR ''1''=''1' AND (acl IS NULL")
        keep = to_predicate([readable_by(["hr"])])
        assert keep({"acl": None}) and keep({"acl": ",finance,hr,"}) and not keep({"acl": ",finance,"})
        assert to_predicate([readable_by([])])({"acl": ""}) and not to_predicate([readable_by([])])({"acl": ",a,"})


@pytest.mark.parametrize("bm25", ["lancedb", "rank_bm25"])
class TestRetrievalReadsOnlyReadableChunks:
    def test_topk_is_filled_with_readable_chunks_and_filters_only_narrow(self, make_stack, tmp_path, bm25):
        stack = make_stack(f"retrieve.retrievers.bm25.backend={bm25}", "retrieve.top_k=3", "rerank.top_k=3")
        report = stack.ingestor(progress=False).run([corpus(tmp_path)])
        assert report.added == 8 and stack.store.has_acl()
        query = "vault combination payroll ledger"
        everything = stack.search(query, top_k=3, groups=ALL).passages
        assert any(p.doc_id.startswith("secret") for p in everything)
        for groups, allowed in [
            ((), {"public-1"}),
            (("finance",), {"public-1", "finance-1"}),
            (("hr", "x"), {"public-1", "finance-1"} | {f"secret-{i}" for i in range(6)}),
        ]:
            got = [p.doc_id for p in stack.search(query, top_k=3, groups=groups).passages]
            assert got and set(got) <= allowed, (groups, got)
            # the filter narrows inside the query: no readable document goes missing for the hidden ones
            if groups == ("finance",):
                assert set(got) == allowed
            for where in ("doc_id=secret-1", "doc_id!=public-1", "source~docs"):
                narrowed = [p.doc_id for p in stack.search(query, top_k=3, where=where, groups=groups).passages]
                assert set(narrowed) <= allowed, (where, narrowed)
        assert stack.store.count(()) == 1 and stack.store.count(("finance",)) == 2 and stack.store.count(ALL) == 8
        assert [d["doc_id"] for d in stack.store.list_documents(("finance",))] == ["finance-1", "public-1"]
        assert stack.store.document_chunks("secret-1", ()) == [] and stack.store.document_chunks("secret-1", ALL)
        assert stack.store.delete_documents(["secret-1"], ("finance",)) == 0 and stack.store.count(ALL) == 8


class TestIngestLabels:
    def test_cli_style_labels_and_relabelling(self, make_stack, tmp_path):
        doc = tmp_path / "memo.md"
        doc.write_text(f"# Memo\n\n{SECRET}\n", encoding="utf-8")
        stack = make_stack()
        assert stack.ingestor(progress=False).run([doc], acl="hr").added == 1
        assert stack.store.count(()) == 0 and stack.store.count(("hr",)) > 0
        # other labels: the document is updated; no labels: unlabelled again
        assert stack.ingestor(progress=False).run([doc], acl="legal").updated == 1
        assert stack.store.count(("hr",)) == 0 and stack.store.count(("legal",)) > 0
        assert stack.ingestor(progress=False).run([doc], acl="legal").unchanged == 1
        assert stack.ingestor(progress=False).run([doc]).updated == 1 and stack.store.count(()) > 0

    def test_writes_respect_reads(self, make_stack, tmp_path):
        # a writer who may read only finance documents re-ingests the corpus with every record changed and the
        # hr ones dropped: the documents it may read are updated or removed, the hr ones stay exactly as they were
        path = corpus(tmp_path)
        stack = make_stack()
        assert stack.ingestor(progress=False).run([path]).added == 8
        before = {c.chunk_id: c.text for d in ("secret-0", "secret-1") for c in stack.store.document_chunks(d, ALL)}
        records = [json.loads(line) for line in path.read_text().splitlines()]
        dropped = ("secret-0", "secret-1")
        kept = [{**r, "text": r["text"] + " Changed.", "acl": "public"} for r in records if r["_id"] not in dropped]
        path.write_text("\n".join(json.dumps(r) for r in kept), encoding="utf-8")
        report = stack.ingestor(progress=False).run([path], scope=("finance",))
        assert report.updated == 2 and report.removed == 0  # finance-1, public-1; secret-2.. are not the writer's
        hidden = {e.reason for e in report.errors}
        assert hidden == {f"no document 'secret-{i}' to change with this key; skipped" for i in range(2, 6)}
        assert {c.chunk_id: c.text for d in ("secret-0", "secret-1") for c in stack.store.document_chunks(d, ALL)} == (
            before
        )
        assert all("Changed" not in c.text for c in stack.store.document_chunks("secret-3", ALL))
        assert "Changed" in stack.store.document_chunks("finance-1", ALL)[0].text
        # a writer who may read everything removes what vanished
        assert stack.ingestor(progress=False).run([path], scope=ALL).removed == 2

    def test_a_bad_label_in_a_corpus_record_is_reported_not_indexed(self, make_stack, tmp_path):
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps({"_id": "a", "text": "some text", "acl": ["ok", "not ok"]}), encoding="utf-8")
        stack = make_stack()
        report = stack.ingestor(progress=False).run([path])
        assert report.added == 0 and "invalid access label" in report.errors[0].reason


class TestIndexesWithoutTheColumn:
    def old_index(self, make_stack, tmp_path, *overrides):
        """A collection as made before labels existed: no acl column."""
        stack = make_stack(*overrides)
        stack.ingestor(progress=False).run([tmp_path / "public.md"])
        stack.store.table().drop_columns([ACL_FIELD])
        fresh = make_stack(*overrides)  # a new process opening it
        assert not fresh.store.has_acl()
        return fresh

    @pytest.mark.parametrize("bm25", ["lancedb", "rank_bm25"])
    def test_read_as_unlabelled_then_extended_with_labels(self, make_stack, tmp_path, bm25):
        (tmp_path / "public.md").write_text("# Office\n\nThe office vault is painted green.\n", encoding="utf-8")
        (tmp_path / "memo.md").write_text(f"# Memo\n\n{SECRET}\n", encoding="utf-8")
        stack = self.old_index(make_stack, tmp_path, f"retrieve.retrievers.bm25.backend={bm25}")
        before = stack.store.count(ALL)
        assert [p.doc_id for p in stack.search("vault", groups=()).passages]
        assert stack.store.list_documents(()) and stack.store.count(()) == before
        # an unlabelled ingest leaves the schema as it is; a labelled one adds the column, old rows unlabelled
        assert stack.ingestor(progress=False).run([tmp_path / "public.md"]).unchanged == 1
        assert not stack.store.has_acl()
        assert stack.ingestor(progress=False).run([tmp_path / "memo.md"], acl="hr").added == 1
        assert stack.store.has_acl() and stack.store.count(()) == before

        def found(groups):
            return {p.doc_id.split("-")[0] for p in stack.search("vault combination payroll", groups=groups).passages}

        assert found(()) == {"public"} and found(("hr",)) == {"public", "memo"}
