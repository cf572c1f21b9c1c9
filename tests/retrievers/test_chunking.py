import pytest

from switchyard.retrievers.chunking import Chunker, _token_counter
from switchyard.retrievers.documents import SourceDocument


@pytest.fixture(scope="module")
def long_doc():
    sentences = [
        f"Sentence number {i} talks about yard {i % 7} and the retarder settings used there." for i in range(80)
    ]
    text = " ".join(sentences)
    half = len(text) // 2
    return SourceDocument("doc", "/x/doc.pdf", "Doc", text, page_starts=[(0, 1), (half, 2)])


class TestChunker:
    def test_offsets_pages_and_ids(self, long_doc, embedder):
        chunks = Chunker(64, 16, embedder.tokenizer_file).run(long_doc, "h1")
        assert len(chunks) > 5
        for i, c in enumerate(chunks):
            assert long_doc.text[c.start_char : c.end_char] == c.text
            assert c.chunk_id == f"doc::{i}" and c.chunk_index == i and c.doc_hash == "h1"
            assert c.page == (1 if c.start_char < len(long_doc.text) // 2 else 2)
        assert chunks[0].page == 1 and chunks[-1].page_end == 2

    def test_chunks_respect_token_budget_and_overlap(self, long_doc, embedder):
        count = _token_counter(embedder.tokenizer_file)
        chunks = Chunker(64, 16, embedder.tokenizer_file).run(long_doc, "h")
        assert all(len(count(c.text)) <= 64 for c in chunks)
        # consecutive chunks overlap and each starts on a sentence boundary
        assert all(b.start_char < a.end_char for a, b in zip(chunks, chunks[1:]))
        assert all(c.text.startswith("Sentence number") for c in chunks)

    def test_short_text_is_one_chunk(self, embedder):
        doc = SourceDocument("d", "s", "t", "Just one short sentence.")
        (chunk,) = Chunker(64, 8, embedder.tokenizer_file).run(doc, "h")
        assert chunk.text == doc.text and chunk.page is None

    def test_overlap_must_be_smaller(self, embedder):
        with pytest.raises(ValueError):
            Chunker(32, 32, embedder.tokenizer_file)
