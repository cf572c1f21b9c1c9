"""Sentence-aware chunking with llama-index-core's SentenceSplitter.

Chunk sizes are counted with the embedding model's own tokenizer (loaded from the packaged tokenizer.json), so a
chunk never exceeds what the model reads and the splitter never reaches for tiktoken/NLTK downloads.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from switchyard.retrievers.documents import Chunk, SourceDocument, search_text, sha256_hex
from switchyard.retrievers.filters import encode_labels
from switchyard.retrievers.third_party import import_keeping_environment


@lru_cache(maxsize=4)
def _token_counter(tokenizer_file: str):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_file)
    tok.no_padding()
    tok.no_truncation()

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    return encode


def tokenizer_file_for(model_dir: str | Path) -> str:
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer.json in embedding model folder {model_dir}")
    return str(path)


class Chunker:
    """Split a SourceDocument into Chunks that keep ids, page numbers and character offsets."""

    def __init__(self, chunk_size: int, chunk_overlap: int, tokenizer_file: str):
        if chunk_overlap >= chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self._splitter = _sentence_splitter(chunk_size, chunk_overlap, _token_counter(tokenizer_file))

    def run(self, doc: SourceDocument, doc_hash: str) -> list[Chunk]:
        chunks: list[Chunk] = []
        cursor = 0
        for i, piece in enumerate(self._splitter.split_text(doc.text)):
            start = _locate(doc.text, piece, cursor)
            end = start + len(piece)
            # the next chunk overlaps this one, so search for it from just after this one's start
            cursor = start + 1
            chunks.append(
                Chunk(
                    chunk_id=f"{doc.doc_id}::{i}",
                    doc_id=doc.doc_id,
                    source=doc.source,
                    title=doc.title,
                    text=piece,
                    chunk_index=i,
                    start_char=start,
                    end_char=end,
                    page=doc.page_at(start),
                    page_end=doc.last_page_in(start, end),
                    content_hash=sha256_hex(piece)[:16],
                    doc_hash=doc_hash,
                    acl=encode_labels(doc.acl),
                )
            )
        return chunks


class SentenceWindows:
    """The texts a chunk is embedded as for dense retrieval: overlapping windows of whole sentences of up to
    `window_tokens` tokens (the same SentenceSplitter, at a smaller size), each with the chunk's title in front.

    all-MiniLM-L6-v2 was trained on short texts; one vector for a 256-token chunk blurs the sentence a question
    matches, while a chunk scored by its best window keeps it (docs/benchmarks.md, issue 11). A chunk that fits in
    one window yields its own search text, whose vector the chunk already has."""

    def __init__(self, window_tokens: int, window_overlap: int, tokenizer_file: str):
        if window_tokens < 1 or not 0 <= window_overlap < window_tokens:
            raise ValueError("need window_tokens >= 1 and 0 <= window_overlap < window_tokens")
        self.window_tokens = window_tokens
        self.window_overlap = window_overlap
        self._count = _token_counter(tokenizer_file)
        self._splitter = _sentence_splitter(window_tokens, window_overlap, self._count)

    def run(self, chunk: Chunk) -> list[str]:
        if len(self._count(chunk.text)) <= self.window_tokens:
            return [search_text(chunk.title, chunk.text)]
        return [search_text(chunk.title, piece) for piece in self._splitter.split_text(chunk.text)] or [
            search_text(chunk.title, chunk.text)
        ]


def _sentence_splitter(size: int, overlap: int, tokenizer):
    from llama_index.core.node_parser import SentenceSplitter

    import_keeping_environment("nltk")  # its sentence tokenizer, imported before the splitter asks for it
    return SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=tokenizer)


def _locate(text: str, piece: str, cursor: int) -> int:
    """Offset of `piece` in `text` at or after `cursor`; the splitter only strips whitespace, so a prefix finds it."""
    pos = text.find(piece, cursor)
    if pos >= 0:
        return pos
    probe = piece[:40]
    pos = text.find(probe, cursor)
    if pos < 0:
        pos = text.find(probe)
    return max(pos, 0)
