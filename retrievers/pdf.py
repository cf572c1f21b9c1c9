"""PDF text extraction with layout clean-up.

pypdf gives every text fragment with its font size and position (through `visitor_text`). From those we drop what
would otherwise land in the middle of a sentence when pages are joined: running headers and footers (lines repeated
at the top or bottom of most pages, digits ignored), bare page numbers, and footnote markers (small raised digits or
symbols inside body text). Footnote bodies (small text below the last body line) are moved to a "Notes" section at
the end of the document so that their content stays searchable without splitting the page's last sentence.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from switchyard.errors import PdfError
from switchyard.retrievers.documents import SourceDocument

_MARKER = re.compile(r"^[\d*†‡§¶]{1,3}$")
_PAGE_NUMBER = re.compile(r"^(page\s*)?[-–—(\[]?\s*(\d{1,4}|[ivxlcdm]{1,7})\s*[-–—)\]]?(\s*(of|/)\s*\d{1,4})?$", re.I)
_SMALL = 0.85  # a fragment smaller than this share of the body font size is "small"


@dataclass
class _Piece:
    text: str
    y: float
    size: float


@dataclass
class _Line:
    pieces: list[_Piece] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces).strip()

    @property
    def y(self) -> float:
        return next((p.y for p in self.pieces if p.text.strip()), 0.0)

    @property
    def size(self) -> float:
        return max((p.size for p in self.pieces if p.text.strip()), default=0.0)


def _page_lines(page) -> list[_Line]:
    lines = [_Line()]

    def visit(text, cm, tm, font_dict, font_size):
        if not text:
            return
        a, b, c, d, e, f = _multiply(tm, cm)
        size = abs(font_size) * math.sqrt(abs(a * d - b * c)) if font_size else 0.0
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i > 0:
                lines.append(_Line())
            if part:
                lines[-1].pieces.append(_Piece(part, f, size))

    page.extract_text(visitor_text=visit)
    return _merge_physical_lines([line for line in lines if line.text])


def _merge_physical_lines(lines: list[_Line]) -> list[_Line]:
    """pypdf starts a new line at every baseline change, so a raised footnote marker splits its line in three;
    glue lines whose baselines are closer than half a character height back together."""
    merged: list[_Line] = []
    for line in lines:
        if merged and abs(line.y - merged[-1].y) <= 0.5 * max(line.size, merged[-1].size):
            merged[-1].pieces.extend(line.pieces)
        else:
            merged.append(line)
    return merged


def _multiply(m, n):
    return (
        m[0] * n[0] + m[1] * n[2],
        m[0] * n[1] + m[1] * n[3],
        m[2] * n[0] + m[3] * n[2],
        m[2] * n[1] + m[3] * n[3],
        m[4] * n[0] + m[5] * n[2] + n[4],
        m[4] * n[1] + m[5] * n[3] + n[5],
    )


def _body_size(pages: list[list[_Line]]) -> float:
    sizes: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            for p in line.pieces:
                sizes[round(p.size, 1)] += len(p.text.strip())
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _edge_key(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", text.lower())).strip()


def _running_keys(pages: list[list[_Line]], edge: int = 2) -> set[str]:
    """Normalised lines that sit among the first/last `edge` lines of at least half the pages (min. 2)."""
    counts: Counter[str] = Counter()
    for lines in pages:
        counts.update({_edge_key(line.text) for line in lines[:edge] + lines[-edge:]})
    need = max(2, math.ceil(len(pages) / 2))
    return {key for key, n in counts.items() if n >= need}


def _join_lines(lines: list[str]) -> str:
    """Re-flow lines into paragraphs: hyphenated line ends are joined, short unpunctuated lines stay headings."""
    out = ""
    for line in lines:
        if not out:
            out = line
        elif re.search(r"[a-z]-$", out) and line[:1].islower():
            out = out[:-1] + line
        elif out.endswith("\n") or (len(_last_line(out)) < 60 and not re.search(r"[.,;:!?)\]]$", out)):
            out = out.rstrip("\n") + "\n" + line
        else:
            out += " " + line
    return out


def _last_line(text: str) -> str:
    return text.rsplit("\n", 1)[-1]


def load_pdf(path: Path, doc_id: str, source: str) -> SourceDocument:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError, PdfStreamError

    try:
        reader = PdfReader(str(path), strict=False)
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise PdfError("encrypted PDF (a password is required)")
            except (FileNotDecryptedError, NotImplementedError, DependencyErrors):
                raise PdfError("encrypted PDF (a password is required)") from None
        pages = [_page_lines(page) for page in reader.pages]
    except PdfError:
        raise
    except (PdfReadError, PdfStreamError, FileNotDecryptedError) as exc:
        raise PdfError(f"not a readable PDF ({exc})") from None
    except Exception as exc:  # pypdf raises assorted errors on damaged files
        raise PdfError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    if not pages:
        raise PdfError("PDF has no pages")

    body = _body_size(pages)
    running = _running_keys(pages) if len(pages) > 1 else set()
    texts: list[str] = []
    page_starts: list[tuple[int, int]] = []
    notes: list[tuple[int, str]] = []
    offset = 0
    for number, lines in enumerate(pages, start=1):
        kept = _clean_page(lines, body, running, notes, number)
        if not kept:
            continue
        page_text = _join_lines(kept)
        if texts:
            offset += 1  # the "\n" joining pages
        page_starts.append((offset, number))
        texts.append(page_text)
        offset += len(page_text)
    text = "\n".join(texts)
    if notes:
        text += "\n\nNotes\n"
        for number, note in notes:
            page_starts.append((len(text), number))
            text += note + "\n"
    if not text.strip():
        raise PdfError("no extractable text (a scanned PDF? OCR is not supported)")
    title = _title(reader, pages, path)
    return SourceDocument(doc_id=doc_id, source=source, title=title, text=text.strip(), page_starts=page_starts)


def _clean_page(lines: list[_Line], body: float, running: set[str], notes: list, number: int) -> list[str]:
    small = body * _SMALL
    body_ys = [line.y for line in lines if line.size >= small]
    lowest_body = min(body_ys) if body_ys else -math.inf
    kept: list[str] = []
    n = len(lines)
    for i, line in enumerate(lines):
        at_edge = i < 2 or i >= n - 2
        text = line.text
        if at_edge and (_edge_key(text) in running or _PAGE_NUMBER.match(text)):
            continue
        if line.size < small and line.y < lowest_body:
            notes.append((number, re.sub(r"^[\d*†‡§¶]{1,3}\s*", "", text)))
            continue
        if line.size >= small:
            # drop small marker pieces (footnote references) inside body lines
            text = "".join(
                p.text for p in line.pieces if not (p.size < small and _MARKER.match(p.text.strip()))
            ).strip()
        if text:
            kept.append(re.sub(r"[ \t]+", " ", text))
    return kept


def _title(reader, pages: list[list[_Line]], path: Path) -> str:
    try:
        meta_title = (reader.metadata or {}).get("/Title")
    except Exception:
        meta_title = None
    if meta_title and str(meta_title).strip():
        return str(meta_title).strip()
    return path.stem


DependencyErrors: type[Exception]
try:  # pypdf raises this when AES decryption needs the optional `cryptography` package
    from pypdf.errors import DependencyError as DependencyErrors
except ImportError:  # pragma: no cover
    DependencyErrors = RuntimeError
