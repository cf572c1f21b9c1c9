"""Turn paths into SourceDocuments: PDF, text, Markdown, HTML, and JSON/JSONL corpora. Folders recurse.

Every failure becomes a LoadError naming the file, so one bad file never stops the others.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path

from switchyard.errors import AccessError, PdfError
from switchyard.retrievers.documents import LoadError, SourceDocument
from switchyard.retrievers.filters import parse_labels
from switchyard.retrievers.pdf import load_pdf

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}
HTML_SUFFIXES = {".html", ".htm"}
CORPUS_SUFFIXES = {".json", ".jsonl"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | CORPUS_SUFFIXES | {".pdf"}


def file_doc_id(path: Path) -> str:
    """A stable, readable id for a file: its stem plus a hash of its absolute path."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-")[:40] or "doc"
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    return f"{stem}-{digest}"


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path | LoadError]:
    """Expand the given paths: files as they are, folders recursively (hidden entries and unsupported types skipped)."""
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            yield LoadError(str(raw), "no such file or folder")
        elif path.is_dir():
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path)
                if child.is_file() and not any(part.startswith(".") for part in rel.parts):
                    if child.suffix.lower() in SUPPORTED_SUFFIXES:
                        yield child
        elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
            yield LoadError(
                str(path),
                f"unsupported file type '{path.suffix or '(none)'}' "
                f"(supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})",
            )
        else:
            yield path


def load_file(path: Path) -> Iterator[SourceDocument | LoadError]:
    """Yield the documents in one file (one for PDF/text/HTML, many for a corpus), or a LoadError."""
    source = str(path.resolve())
    suffix = path.suffix.lower()
    try:
        if suffix == ".pdf":
            yield load_pdf(path, file_doc_id(path), source)
            return
        raw = path.read_bytes()
    except PdfError as exc:
        yield LoadError(source, str(exc))
        return
    except OSError as exc:
        yield LoadError(source, f"cannot read file ({exc.strerror or exc})")
        return
    text = _decode(raw)
    if isinstance(text, LoadError):
        text.source = source
        yield text
        return
    if suffix in CORPUS_SUFFIXES:
        yield from _load_corpus(path, source, text)
        return
    if suffix in HTML_SUFFIXES:
        title, body = _html_to_text(text)
    else:
        title, body = (_markdown_title(text) if suffix != ".txt" else _first_line_title(text)), text
    if not body.strip():
        yield LoadError(source, "empty document (no text)")
        return
    yield SourceDocument(doc_id=file_doc_id(path), source=source, title=title or path.stem, text=body.strip())


def _decode(raw: bytes) -> str | LoadError:
    if b"\x00" in raw[:8192]:
        return LoadError("", "binary file, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return LoadError("", f"not valid UTF-8 text (byte {exc.start}); re-save it as UTF-8")


def _markdown_title(text: str) -> str | None:
    match = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.M)
    return match.group(1).strip() if match else None


def _first_line_title(text: str) -> str | None:
    """A plain-text file's first line is its title when it is short and not a sentence."""
    first = text.strip().split("\n", 1)[0].strip()
    return first if first and len(first) <= 80 and not first.endswith((".", ",", ";", ":")) else None


class _HTMLText(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "head"}
    _BLOCK = {
        "p",
        "div",
        "br",
        "li",
        "tr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "section",
        "article",
        "pre",
        "blockquote",
        "table",
        "ul",
        "ol",
        "header",
        "footer",
        "title",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in {"br", "img", "hr", "meta", "link", "input"}:
            self._stack.append(tag)
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if "title" in self._stack:
            self.title += data
        elif not self._SKIP.intersection(self._stack):
            self.parts.append(data)


def _html_to_text(html: str) -> tuple[str | None, str]:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    text = re.sub(r"[ \t\r\f\v]+", " ", "".join(parser.parts))
    text = re.sub(r"\s*\n\s*", "\n", text).strip()
    return (parser.title.strip() or None), text


def _load_corpus(path: Path, source: str, text: str) -> Iterator[SourceDocument | LoadError]:
    """BEIR corpus.jsonl ({_id, title, text}) or a JSON list of {title, article} / {_id, title, text} records."""
    records: list
    if path.suffix.lower() == ".jsonl":
        records = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                yield LoadError(f"{source}:{lineno}", f"invalid JSON line ({exc.msg})")
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            yield LoadError(source, f"invalid JSON ({exc.msg} at line {exc.lineno})")
            return
        records = data if isinstance(data, list) else [data]
    if not records:
        yield LoadError(source, "empty corpus (no records)")
        return
    for i, rec in enumerate(records):
        where = f"{source}#{i}"
        if not isinstance(rec, dict):
            yield LoadError(where, "corpus record is not an object")
            continue
        body = rec.get("text", rec.get("article"))
        if not isinstance(body, str) or not body.strip():
            yield LoadError(where, "corpus record has no 'text' or 'article' string")
            continue
        title = str(rec.get("title") or "").strip()
        doc_id = str(rec.get("_id") or rec.get("id") or title or f"{path.stem}-{i}")
        try:
            acl = parse_labels(rec.get("acl"))
        except AccessError as exc:
            yield LoadError(where, str(exc))
            continue
        yield SourceDocument(doc_id=doc_id, source=source, title=title or doc_id, text=body.strip(), acl=acl)


def load_paths(paths: list[str | Path]) -> Iterator[SourceDocument | LoadError]:
    for item in iter_files(paths):
        if isinstance(item, LoadError):
            yield item
        else:
            yield from load_file(item)
