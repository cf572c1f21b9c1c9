"""Ingestion against a real LanceDB on disk with the real embedding model."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from switchyard.run_context import ALL
from tests.conftest import ROOT, SAMPLES


def _docs(stack):
    return {d["doc_id"]: d for d in stack.store.list_documents(ALL)}


class TestIngestor:
    def test_ingest_sample_then_reingest_is_noop(self, make_stack):
        stack = make_stack()
        first = stack.ingestor(progress=False).run([SAMPLES])
        assert first.added == 5 and not first.errors and first.chunks_written >= 5
        version = stack.store.version()
        again = stack.ingestor(progress=False).run([SAMPLES])
        assert again.unchanged == 5 and again.added == again.updated == again.chunks_written == 0
        assert stack.store.version() == version  # nothing written at all

    def test_every_chunk_keeps_its_metadata(self, make_stack):
        stack = make_stack()
        stack.ingestor(progress=False).run([SAMPLES])
        rows = stack.store.scan(
            ["doc_id", "source", "title", "page", "start_char", "end_char", "content_hash", "doc_hash", "text"],
            scope=ALL,
        ).to_pylist()
        pdf_rows = [r for r in rows if r["source"].endswith(".pdf")]
        assert pdf_rows and all(r["page"] in (1, 2, 3) for r in pdf_rows)
        assert all(r["title"] and r["doc_hash"] and r["content_hash"] and r["end_char"] > r["start_char"] for r in rows)

    def test_changed_file_replaces_its_chunks(self, make_stack, tmp_path):
        folder = tmp_path / "docs"
        folder.mkdir()
        f = folder / "a.txt"
        f.write_text("The old text mentions turnips. " * 40)
        (folder / "b.txt").write_text("An unrelated document about signals.")
        stack = make_stack("ingest.chunk_size=64", "ingest.chunk_overlap=8")
        stack.ingestor(progress=False).run([folder])
        f.write_text("The new text mentions parsnips.")
        report = stack.ingestor(progress=False).run([folder])
        assert (report.updated, report.unchanged, report.added) == (1, 1, 0)
        rows = stack.store.scan(["doc_id", "text"], scope=ALL).to_pylist()
        texts = [r["text"] for r in rows if "parsnips" in r["text"] or "turnips" in r["text"]]
        assert texts == ["The new text mentions parsnips."]

    def test_record_removed_from_corpus_is_deleted(self, make_stack, tmp_path):
        corpus = tmp_path / "corpus.jsonl"
        recs = [{"_id": f"d{i}", "title": f"T{i}", "text": f"text {i}"} for i in range(3)]
        corpus.write_text("\n".join(json.dumps(r) for r in recs))
        stack = make_stack()
        stack.ingestor(progress=False).run([corpus])
        corpus.write_text("\n".join(json.dumps(r) for r in recs[:2]))
        report = stack.ingestor(progress=False).run([corpus])
        assert report.removed == 1 and set(_docs(stack)) == {"d0", "d1"}

    def test_partially_bad_corpus_deletes_nothing(self, make_stack, tmp_path):
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text('{"_id": "a", "text": "alpha"}\n{"_id": "b", "text": "beta"}\n')
        stack = make_stack()
        stack.ingestor(progress=False).run([corpus])
        corpus.write_text('{"_id": "a", "text": "alpha"}\n{broken\n')
        report = stack.ingestor(progress=False).run([corpus])
        assert report.errors and report.removed == 0 and set(_docs(stack)) == {"a", "b"}

    def test_bad_files_do_not_touch_the_index(self, make_stack, tmp_path):
        stack = make_stack()
        stack.ingestor(progress=False).run([SAMPLES])
        before = {r["chunk_id"]: r["text"] for r in stack.store.scan(["chunk_id", "text"], scope=ALL).to_pylist()}
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "corrupt.pdf").write_bytes(b"%PDF-1.7 rubbish")
        (bad / "bin.txt").write_bytes(b"\x00\x01")
        report = stack.ingestor(progress=False).run([bad, tmp_path / "missing.md"])
        assert report.ingested == 0 and len(report.errors) == 3
        after = {r["chunk_id"]: r["text"] for r in stack.store.scan(["chunk_id", "text"], scope=ALL).to_pylist()}
        assert after == before

    def test_delete_documents(self, make_stack):
        stack = make_stack()
        stack.ingestor(progress=False).run([SAMPLES])
        doc_id = next(d for d in _docs(stack) if d.startswith("track-gauge"))
        assert stack.store.delete_documents([doc_id], ALL) >= 1
        assert doc_id not in _docs(stack) and len(_docs(stack)) == 4
        assert not any(p.doc_id == doc_id for p in stack.search("standard gauge 1,435 mm", groups=ALL).passages)

    def test_other_embedding_model_is_refused(self, make_stack, tmp_path):
        from switchyard.errors import StoreError
        from switchyard.retrievers.store import IndexStore

        stack = make_stack()
        stack.ingestor(progress=False).run([SAMPLES])
        other = IndexStore(stack.store.uri, stack.collection, embedding_model="other", dim=384)
        with pytest.raises(StoreError, match="was built with embedding model"):
            other.table()


def _version_count(index: Path) -> int:
    versions = index / "default.lance" / "_versions"
    return len(list(versions.glob("*.manifest"))) if versions.exists() else 0


def _write_version(folder: Path, tag: str, n: int) -> None:
    for i in range(n):
        body = " ".join(
            f"Document {i} {tag} sentence {j} about yard number {i}." for j in range(30 if tag == "B" else 12)
        )
        (folder / f"doc{i:02d}.txt").write_text(body)


@pytest.mark.slow
class TestKilledIngest:
    """kill -9 a real `cli.py ingest` mid-run: every document is entirely old or entirely new, and a re-run finishes."""

    N = 24

    def _ingest_cmd(self, folder, index):
        return [
            sys.executable,
            str(ROOT / "cli.py"),
            "ingest",
            str(folder),
            "--index-dir",
            str(index),
            "--no-progress",
            "--set",
            "ingest.batch_docs=1",
            "--set",
            "ingest.chunk_size=48",
            "--set",
            "ingest.chunk_overlap=8",
        ]

    def test_kill_mid_ingest_then_rerun(self, tmp_path, make_stack):
        folder, index = tmp_path / "docs", tmp_path / "index"
        folder.mkdir()
        _write_version(folder, "A", self.N)
        subprocess.run(self._ingest_cmd(folder, index), check=True, capture_output=True, timeout=600)
        _write_version(folder, "B", self.N)

        start_versions = _version_count(index)
        proc = subprocess.Popen(self._ingest_cmd(folder, index), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while _version_count(index) < start_versions + 3 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # land somewhere inside a later batch
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the ingest finished before it could be killed"

        stack = make_stack("ingest.chunk_size=48", "ingest.chunk_overlap=8", uri=index)
        expected = self._expected_chunks(stack, folder)
        rows = stack.store.scan(["doc_id", "text", "doc_hash", "chunk_index"], scope=ALL).to_pylist()
        by_doc: dict[str, list[dict]] = {}
        for r in rows:
            by_doc.setdefault(r["doc_id"], []).append(r)
        assert len(by_doc) == self.N  # nothing lost
        states = set()
        for doc_id, chunks in by_doc.items():
            tags = {("B" if " B sentence" in c["text"] else "A") for c in chunks}
            assert len(tags) == 1, f"{doc_id} is half old, half new"
            (tag,) = tags
            states.add(tag)
            assert len({c["doc_hash"] for c in chunks}) == 1
            assert sorted(c["chunk_index"] for c in chunks) == list(range(expected[doc_id][tag]))
        assert states == {"A", "B"}, "the kill should land mid-run"

        done = subprocess.run(self._ingest_cmd(folder, index), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        rows = stack.store.scan(["doc_id", "text"], scope=ALL).to_pylist()
        assert all(" B sentence" in r["text"] for r in rows)
        assert len({r["doc_id"] for r in rows}) == self.N
        hits = stack.search("Document 7 B sentence about yard number 7", top_k=3, groups=ALL).passages
        assert hits and hits[0].doc_id.startswith("doc07")

    def _expected_chunks(self, stack, folder):
        from switchyard.retrievers.loaders import load_file

        counts = {}
        for tag in ("A", "B"):
            _write_version(folder, tag, self.N)
            for path in sorted(folder.iterdir()):
                (doc,) = list(load_file(path))
                counts.setdefault(doc.doc_id, {})[tag] = len(stack.chunker.run(doc, "x"))
        return counts


class TestDeleteMatching:
    """`cli.py delete`'s matching, in the library (retrievers/ingest.py): ids, files, folders; all or nothing."""

    def test_ids_files_and_folders_all_or_nothing(self, make_stack):
        from switchyard.errors import NotFound
        from switchyard.retrievers.ingest import delete_matching

        stack = make_stack()
        stack.ingestor(progress=False).run([SAMPLES])
        ids = set(_docs(stack))
        couplers = next(d for d in ids if d.startswith("couplers"))
        # one target matching nothing: an error, and the target before it is not deleted either
        with pytest.raises(NotFound, match="no indexed document matches 'no-such-doc'.*nothing deleted"):
            delete_matching(stack.store, [couplers, "no-such-doc"], ALL)
        # a path sharing a folder's prefix is not that folder
        with pytest.raises(NotFound, match="hand"):
            delete_matching(stack.store, [str(SAMPLES / "hand")], ALL)
        assert set(_docs(stack)) == ids
        handbook = {d for d, doc in _docs(stack).items() if "/handbooks/" in doc["source"]}
        assert handbook
        documents, chunks = delete_matching(stack.store, [couplers, str(SAMPLES / "handbooks"), couplers], ALL)
        assert documents == 1 + len(handbook) and chunks >= documents
        assert set(_docs(stack)) == ids - handbook - {couplers}
        gauge = next(d for d in _docs(stack) if d.startswith("track-gauge"))
        assert delete_matching(stack.store, [str(SAMPLES / "track-gauge.txt")], ALL)[0] == 1
        assert gauge not in _docs(stack)

    def test_an_id_wins_over_a_path_and_a_bare_word_is_an_id(self, tmp_path, monkeypatch):
        from switchyard.errors import NotFound
        from switchyard.retrievers.ingest import matching_documents

        (tmp_path / "notes").mkdir()
        docs = [
            {"doc_id": "notes", "source": "/elsewhere/notes.md"},
            {"doc_id": "n1", "source": str(tmp_path / "notes" / "a.md")},
            {"doc_id": "n2", "source": str(tmp_path / "notes" / "b.md")},
        ]
        monkeypatch.chdir(tmp_path)
        assert matching_documents(docs, ["notes"]) == ["notes"]  # the id, though a folder of that name exists
        assert matching_documents(docs, ["./notes", "n2"]) == ["n1", "n2"]  # a path: the folder's documents
        with pytest.raises(NotFound):
            matching_documents(docs, ["a"])  # neither an id nor a path (no separator, no dot, not on disk)
