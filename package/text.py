"""Plain-text helpers that several layers share: sentence splitting, the `[n]` citation marks an answer carries, and
the content words (stop words removed) that grounding and citation checks compare. No model, no other layer."""

from __future__ import annotations

import re

from switchyard.stop_words import ENGLISH_STOP_WORDS

CITATION_MARK = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")  # "[2]" or "[1, 3]", with the space before it
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def cited_numbers(sentence: str) -> set[int]:
    """The 1-based passage numbers a sentence cites with [n] or [n, m] markers."""
    return {int(n) for group in CITATION_MARK.findall(sentence) for n in group.split(",")}


def strip_citations(text: str) -> str:
    return CITATION_MARK.sub("", text).strip()


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if w not in ENGLISH_STOP_WORDS and len(w) > 1}
