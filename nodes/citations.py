"""Citation checking after generation: every answer sentence is matched to the kept passage that supports it best.

Support of a passage for a sentence = the mean of the cosine of their embeddings and the share of the sentence's
content words found in the passage. Both are needed: topical sentences that add made-up facts have a fair cosine
but low word overlap. The threshold (0.55) was checked on HotpotQA (bench/calibration/03_support.py): 0.90-0.91
accuracy on held-out supported/distractor pairs, flat from 0.45 to 0.55. Known limit: a sentence copied from a
passage with one entity swapped still scores high; facts spread over two passages are judged one passage at a time. A citation to a passage below `threshold` is replaced by the best-supporting passage when that
one clears the threshold, else dropped; the sentence is then reported as unsupported. Citations are renumbered
1..m in order of first use, so `[n]` in the answer always points at `citations[n-1]`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from switchyard.retrievers.documents import Passage
from switchyard.text import cited_numbers, content_words, split_sentences, strip_citations


def support_matrix(sentences: list[str], passages: list[Passage], embedder, passage_vectors=None) -> list[list[float]]:
    if not sentences or not passages:
        return [[0.0] * len(passages) for _ in sentences]
    if passage_vectors is None:
        passage_vectors = embedder.run([p.text for p in passages])
    sims = embedder.run(sentences) @ passage_vectors.T
    words = [content_words(p.text) for p in passages]
    out = []
    for i, sentence in enumerate(sentences):
        mine = content_words(sentence)
        row = []
        for j in range(len(passages)):
            overlap = len(mine & words[j]) / len(mine) if mine else 0.0
            row.append((float(sims[i, j]) + overlap) / 2)
        out.append(row)
    return out


def verify_citations(
    answer: str,
    passages: list[Passage],
    embedder,
    threshold: float,
    drop_unsupported: bool = False,
    passage_vectors=None,
) -> tuple[str, list[Citation], dict]:
    """Returns (answer with checked, renumbered [n] markers; citations; counts of what was changed).

    With `drop_unsupported`, sentences no passage supports are removed from the answer (counted as `removed`).
    """
    sentences = split_sentences(answer)
    bare = [strip_citations(s) for s in sentences]
    support = support_matrix(bare, passages, embedder, passage_vectors)
    stats = {"sentences": len(sentences), "kept": 0, "corrected": 0, "dropped": 0, "unsupported": 0, "removed": 0}
    order: list[int] = []  # passage indexes in order of first citation
    out_sentences = []
    for sentence, text, row in zip(sentences, bare, support):
        cited = {n - 1 for n in cited_numbers(sentence)}
        cited = {c for c in cited if 0 <= c < len(passages)}
        good = sorted(c for c in cited if row[c] >= threshold)
        stats["kept"] += len(good)
        if not good:
            best = max(range(len(passages)), key=lambda j: row[j]) if passages else None
            if best is not None and row[best] >= threshold:
                good = [best]
                stats["corrected" if cited else "kept"] += 1
            else:
                stats["unsupported"] += 1
        stats["dropped"] += len(cited - set(good))
        if not good and drop_unsupported:
            stats["removed"] += 1
            continue
        for c in good:
            if c not in order:
                order.append(c)
        marks = "".join(f" [{order.index(c) + 1}]" for c in good)
        body = text.rstrip()
        end = body[-1] if body and body[-1] in ".!?" else ""
        out_sentences.append((body[:-1] if end else body) + marks + (end or ""))
    citations = [cite_record(n, passages[j]) for n, j in enumerate(order, start=1)]
    return " ".join(out_sentences), citations, stats


class Citation(BaseModel):
    """Passage `[n]` of an answer: the document it comes from and the passage text."""

    model_config = ConfigDict(extra="forbid")

    n: int
    doc_id: str
    title: str
    source: str
    page: int | None
    text: str


def cite_record(n: int, passage: Passage) -> Citation:
    return Citation(
        n=n, doc_id=passage.doc_id, title=passage.title, source=passage.source, page=passage.page, text=passage.text
    )
