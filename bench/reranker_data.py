"""The training data rules of the cross-encoder (issue 61), kept apart from the training script so that they can
be tested on small fixtures (tests/bench/test_reranker_data.py). Standard library only.

The rule (written into docs/reranker-data-card.md too): the cross-encoder is trained on TRAINING SPLITS ONLY.

- SQuAD v1.1 **train**, questions about paragraphs that are NOT the first paragraph of their article (the suite
  indexes first paragraphs: squad-intros / squad-low-overlap `dev` are first-paragraph questions of SQuAD train
  articles, their `test` comes from SQuAD dev, which is never used for training).
- The suite's tuning (`dev`) splits of scifact (BEIR SciFact train), hotpotqa (dev300_a.jsonl) and phantomwiki (its
  dev half), each cut by `tune_half(query id)` into a TRAIN half (training pairs) and a TUNE half (never trained on;
  written as qrels/dev-tune.tsv for choosing N, the blend and thresholds). hotpot-single's dev queries are
  hotpotqa's (same ids), so the same cut applies to them.
- Never: any qrels/test.tsv of the suite (SciFact test, dev500.jsonl, SQuAD dev, PhantomWiki's test half), the
  PhantomWiki instances s3/s4, the tune halves, the squad-intros / squad-low-overlap dev questions.
  `drop_held_out` removes a training query whose id or normalised text is held out, and `assert_disjoint` checks it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SALT = "switchyard-ce-train/1"  # a salted hash: independent of the suite's own sha256(id) orderings


def tune_half(qid: str) -> bool:
    """True: the query is in the TUNE half of its dev split (never trained on); False: in the TRAIN half. Stable:
    a function of the id alone (salted sha256), so every run and every dataset sharing ids cut the same way."""
    return hashlib.sha256(f"{SALT}:{qid}".encode()).digest()[0] & 1 == 1


def split_dev(qrels: dict[str, dict[str, float]]) -> tuple[dict, dict]:
    """A dev split's qrels -> (train half, tune half)."""
    train = {q: r for q, r in qrels.items() if not tune_half(q)}
    tune = {q: r for q, r in qrels.items() if tune_half(q)}
    return train, tune


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


@dataclass
class HeldOut:
    """Query ids (per id namespace: the suite's folders share ids across datasets, e.g. SciFact's and PhantomWiki's
    are small integers) and normalised texts (across all datasets) that training must never see."""

    ids: set[tuple[str, str]] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)

    def add(self, namespace: str, queries: dict[str, str]) -> None:
        self.ids.update((namespace, q) for q in queries)
        self.texts.update(normalise(t) for t in queries.values())

    def holds(self, namespace: str, qid: str, text: str) -> bool:
        return (namespace, qid) in self.ids or normalise(text) in self.texts


def drop_held_out(namespace: str, queries: dict[str, str], held: HeldOut) -> tuple[dict[str, str], list[str]]:
    """The training queries that are not held out (by id or by normalised text), and the ids dropped."""
    kept = {q: t for q, t in queries.items() if not held.holds(namespace, q, t)}
    return kept, sorted(set(queries) - set(kept))


def assert_disjoint(namespace: str, train: dict[str, str], held: HeldOut) -> None:
    """Raises AssertionError naming the first training query found in a held-out split."""
    for qid, text in train.items():
        if (namespace, qid) in held.ids:
            raise AssertionError(f"training query id {namespace}:{qid} is in a held-out split")
        if normalise(text) in held.texts:
            raise AssertionError(f"training query {namespace}:{qid} ({text[:60]!r}) has the text of a held-out query")


# -- SQuAD v1.1 train: non-first paragraphs ---------------------------------------------------------------------
def squad_training_set(
    squad: dict, max_paragraphs: int | None, per_paragraph: int = 1
) -> tuple[list[dict], dict[str, str], dict[str, dict[str, float]], dict[str, list[str]]]:
    """From SQuAD v1.1 train's JSON: (corpus, queries, qrels, answers) over paragraphs with index >= 1 of their
    article (never the first one). `max_paragraphs` paragraphs are taken in salted-sha256 order of their doc id
    (spread over every article), each with `per_paragraph` of its questions (sha256(id) order). Doc ids are
    `squad-train:<title>#<paragraph index>`."""
    candidates = []
    for article in squad["data"]:
        title = article["title"].replace("_", " ")
        for index, paragraph in enumerate(article["paragraphs"]):
            if index == 0:
                continue  # the suite's squad-* folders index (and ask about) first paragraphs
            doc_id = f"squad-train:{title}#{index}"
            candidates.append((hashlib.sha256(f"{SALT}:{doc_id}".encode()).hexdigest(), doc_id, title, paragraph))
    candidates.sort()
    corpus, queries, qrels, answers = [], {}, {}, {}
    for _, doc_id, title, paragraph in candidates[:max_paragraphs]:
        corpus.append({"_id": doc_id, "title": title, "text": paragraph["context"]})
        qas = sorted(paragraph["qas"], key=lambda q: hashlib.sha256(q["id"].encode()).hexdigest())
        for q in qas[:per_paragraph]:
            queries[q["id"]] = q["question"]
            qrels[q["id"]] = {doc_id: 1.0}
            answers[q["id"]] = sorted({a["text"] for a in q.get("answers", []) if a["text"].strip()})
    return corpus, queries, qrels, answers


def squad_questions(squad: dict, first_paragraph_only: bool = False) -> dict[str, str]:
    """Every question id -> text of a SQuAD JSON (or only those on each article's first paragraph)."""
    out = {}
    for article in squad["data"]:
        paragraphs = article["paragraphs"][:1] if first_paragraph_only else article["paragraphs"]
        for paragraph in paragraphs:
            for q in paragraph["qas"]:
                out[q["id"]] = q["question"]
    return out


# -- pairs --------------------------------------------------------------------------------------------------------
@dataclass
class Candidate:
    doc_id: str
    text: str


def _contains_answer(text: str, answers: Iterable[str]) -> bool:
    low = normalise(text)
    for a in answers:
        a = normalise(a)
        if a and a not in ("yes", "no") and re.search(r"(?<!\w)" + re.escape(a) + r"(?!\w)", low):
            return True
    return False


def select_negatives(
    ranked: list[Candidate], relevant: Iterable[str], n: int, answers: Iterable[str] = ()
) -> list[Candidate]:
    """The first `n` candidates of a retrieval ranking (best first) that are hard negatives: not of a relevant
    document, not holding a gold answer as a whole word (a likely unlabelled positive), one per document."""
    relevant, answers = set(relevant), list(answers)
    out: list[Candidate] = []
    seen: set[str] = set()
    for c in ranked:
        if len(out) >= n:
            break
        if c.doc_id in relevant or c.doc_id in seen or _contains_answer(c.text, answers):
            continue
        seen.add(c.doc_id)
        out.append(c)
    return out


@dataclass(frozen=True)
class Pair:
    query: str
    passage: str
    label: float
    source: str
    qid: str


def build_pairs(
    source: str, qid: str, query: str, positives: list[str], negatives: list[Candidate], max_positives: int = 2
) -> list[Pair]:
    """(query, passage, 1) for up to `max_positives` relevant passages and (query, passage, 0) for each negative;
    none at all when the query has no positive or no negative (nothing to contrast)."""
    positives = [p for p in positives if p.strip()][:max_positives]
    if not positives or not negatives:
        return []
    return [Pair(query, p, 1.0, source, qid) for p in positives] + [
        Pair(query, n.text, 0.0, source, qid) for n in negatives
    ]


def batch_order(pairs: list[Pair], batch_size: int, epochs: int, seed: int) -> list[list[Pair]]:
    """Every epoch: the pairs shuffled (seeded), sorted by length within windows of 50 batches (less padding: a
    batch is padded to its longest pair), cut into batches, the batches shuffled."""
    rng = random.Random(seed)
    batches: list[list[Pair]] = []
    window = 50 * batch_size
    for _ in range(epochs):
        shuffled = pairs[:]
        rng.shuffle(shuffled)
        epoch = []
        for lo in range(0, len(shuffled), window):
            part = sorted(shuffled[lo : lo + window], key=lambda p: len(p.query) + len(p.passage))
            epoch += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
        rng.shuffle(epoch)
        batches += epoch
    return batches
