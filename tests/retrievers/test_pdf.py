import pytest

from switchyard.errors import PdfError
from switchyard.retrievers.chunking import Chunker
from switchyard.retrievers.pdf import load_pdf
from tests.fixtures.pdfs import FOOTNOTE, HEADER


class TestPdfCleaning:
    def test_headers_footers_page_numbers_and_markers_are_gone(self, handbook_pdf):
        doc = load_pdf(handbook_pdf, "h", str(handbook_pdf))
        assert HEADER not in doc.text
        assert "Page 1 of 3" not in doc.text and "Page 2 of 3" not in doc.text
        assert "retarder1" not in doc.text and "retarder 1 " not in doc.text
        assert "ten feet from a retarder while cars are moving" in doc.text

    def test_sentence_across_page_break_is_whole(self, handbook_pdf):
        doc = load_pdf(handbook_pdf, "h", str(handbook_pdf))
        assert "faster cars overrun the retarders and strike standing cars" in " ".join(doc.text.split())

    def test_footnote_body_moves_to_notes(self, handbook_pdf):
        doc = load_pdf(handbook_pdf, "h", str(handbook_pdf))
        body, _, notes = doc.text.partition("\nNotes\n")
        assert FOOTNOTE not in body
        assert FOOTNOTE in notes
        assert doc.page_at(doc.text.index(FOOTNOTE)) == 2

    def test_title_from_metadata(self, handbook_pdf):
        assert load_pdf(handbook_pdf, "h", str(handbook_pdf)).title == "Yard Operations Handbook"

    def test_no_chunk_contains_header_footer_or_marker(self, handbook_pdf, embedder):
        doc = load_pdf(handbook_pdf, "h", str(handbook_pdf))
        chunks = Chunker(48, 8, embedder.tokenizer_file).run(doc, "hash")
        assert len(chunks) >= 3
        for c in chunks:
            assert "Handbook - Revision" not in c.text
            assert "of 3" not in c.text
            assert "retarder1" not in c.text.replace(" ", "")
        pages = {c.page for c in chunks}
        assert pages >= {1, 2, 3}
        blue = next(c for c in chunks if "blue flag" in c.text)
        assert blue.page == 2


class TestBadPdfs:
    def test_corrupt(self, tmp_path):
        bad = tmp_path / "bad.pdf"
        bad.write_bytes(b"%PDF-1.4\n garbage \x00\x01 not a pdf")
        with pytest.raises(PdfError, match="not a readable PDF|no pages"):
            load_pdf(bad, "b", str(bad))

    def test_empty_file(self, tmp_path):
        bad = tmp_path / "empty.pdf"
        bad.write_bytes(b"")
        with pytest.raises(PdfError):
            load_pdf(bad, "b", str(bad))

    def test_encrypted(self, tmp_path, handbook_pdf):
        from pypdf import PdfReader, PdfWriter

        writer = PdfWriter()
        for page in PdfReader(str(handbook_pdf)).pages:
            writer.add_page(page)
        writer.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")
        enc = tmp_path / "enc.pdf"
        with enc.open("wb") as fh:
            writer.write(fh)
        with pytest.raises(PdfError, match="encrypted"):
            load_pdf(enc, "e", str(enc))

    def test_no_text(self, tmp_path):
        from reportlab.pdfgen import canvas

        blank = tmp_path / "blank.pdf"
        c = canvas.Canvas(str(blank))
        c.showPage()
        c.save()
        with pytest.raises(PdfError, match="no extractable text"):
            load_pdf(blank, "b", str(blank))
