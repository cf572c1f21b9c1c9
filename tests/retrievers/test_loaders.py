import json

from switchyard.retrievers.documents import LoadError, SourceDocument
from switchyard.retrievers.loaders import load_paths
from tests.conftest import SAMPLES


def _load(*paths):
    items = list(load_paths(list(paths)))
    return [i for i in items if isinstance(i, SourceDocument)], [i for i in items if isinstance(i, LoadError)]


class TestLoaders:
    def test_sample_folder_recurses_all_formats(self):
        docs, errors = _load(SAMPLES)
        assert not errors
        by_title = {d.title: d for d in docs}
        assert {"Classification yards", "Railway signalling", "Railway couplers", "Track gauge"} <= set(by_title)
        html = by_title["Railway couplers"]
        assert "console.log" not in html.text and "font-family" not in html.text
        assert "Eli Janney" in html.text
        assert any(d.source.endswith(".pdf") and d.page_starts for d in docs)

    def test_hidden_and_unsupported_files_in_folders_are_skipped(self, tmp_path):
        (tmp_path / ".hidden").mkdir()
        (tmp_path / ".hidden" / "x.txt").write_text("secret")
        (tmp_path / "image.png").write_bytes(b"\x89PNG")
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "a.txt").write_text("hello world")
        docs, errors = _load(tmp_path)
        assert [d.text for d in docs] == ["hello world"] and not errors

    def test_beir_jsonl_and_article_list(self, tmp_path):
        beir = tmp_path / "corpus.jsonl"
        beir.write_text(
            json.dumps({"_id": "d1", "title": "T1", "text": "one"})
            + "\n\n"
            + json.dumps({"_id": "d2", "title": "", "text": "two"})
            + "\n"
        )
        arts = tmp_path / "articles.json"
        arts.write_text(json.dumps([{"title": "Ann", "article": "# Ann\nAnn is a person."}]))
        docs, errors = _load(beir, arts)
        assert not errors
        assert [(d.doc_id, d.title, d.text) for d in docs] == [
            ("d1", "T1", "one"),
            ("d2", "d2", "two"),
            ("Ann", "Ann", "# Ann\nAnn is a person."),
        ]

    def test_bad_inputs_are_one_line_errors_naming_the_file(self, tmp_path):
        (tmp_path / "bin.txt").write_bytes(b"abc\x00\x01\x02")
        (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
        (tmp_path / "empty.md").write_text("   \n")
        (tmp_path / "broken.json").write_text("[{")
        (tmp_path / "rec.jsonl").write_text('{"_id": "a", "text": "ok"}\nnot json\n{"_id": "b"}\n')
        (tmp_path / "notes.docx").write_bytes(b"PK")
        docs, errors = _load(*(sorted(tmp_path.iterdir())), tmp_path / "missing.txt")
        assert [d.doc_id for d in docs] == ["a"]
        reasons = {e.source.split("/")[-1]: e.reason for e in errors}
        assert "binary" in reasons["bin.txt"]
        assert "UTF-8" in reasons["latin.txt"]
        assert "empty" in reasons["empty.md"]
        assert "invalid JSON" in reasons["broken.json"]
        assert "invalid JSON line" in reasons["rec.jsonl:2"]
        assert "no 'text'" in reasons["rec.jsonl#1"]
        assert "unsupported file type" in reasons["notes.docx"]
        assert "no such file" in reasons["missing.txt"]
        assert all("\n" not in str(e) for e in errors)
