"""Question sets generated from your own documents (`switchyard eval generate`), in the format `switchyard eval` reads.

1. **Passages** are the chunks of the documents as an index holds them: the config's chunker over the given files,
   or the rows of an indexed collection; those under `min_chars` characters are left out. They are sampled across
   documents, seeded: the documents in a shuffled order, one passage of each per round (a random one not taken yet),
   so every document gives one before any gives two.
2. **One LLM call per item**, its reply constrained to `{question, answer, supporting_sentence}` (`LLM.structured`:
   the backend's JSON schema where it takes one, a repair round where the reply does not parse), with any
   configured backend. With `answers="passage"` (answer-first, for a weak model) the answer is picked before the
   call: a seeded sentence of the passage and a short answer it states (`answer_candidates`: a date, number, name,
   or what follows "is"); the LLM writes only `{question}`. A passage with no such sentence is `no_answer`, unasked.
3. **Kept only when every check passes**; the first that fails is the rejection's reason (`check_item`):
   - `unparsable`: the reply stayed unparseable after the repair round;
   - `answer_too_long` (more than `max_answer_words` words), `answer_in_question` (the question gives it away),
     `answer_restates_question` (the answer shares two content words with the question: a sentence, not an answer),
     `off_topic` (no content word of the question, besides the answer's, occurs in the passages);
   - `unsupported`: the answer does not occur in its passage (the answer node's grounding check,
     `nodes/short_answer.occurs_in`), or the supporting sentence is not one of the passage's (exactly, or nearly:
     difflib ratio >= 0.8 to one of its sentences; a quote of several sentences by the one holding the answer), or
     does not contain the answer;
   - `copied`: more than `max_copy` of the question's word trigrams occur in the passage;
   - `bridge_named` (two-hop only): the question names the shared entity, so one passage answers it;
   - `duplicate`: its question's embedding has cosine >= `max_similar` with a kept question's.
4. **Two-hop items** (`two_hop` > 0: that share of the tries): passages A and B of different documents that both
   mention a name (two or more capitalised words), B preferably the document about it; the answer comes from B.

Every kept item records its provenance as gold evidence: `gold_doc_ids`, and `provenance`: per passage its
`doc_id`, `source`, `chunk_id` and the supporting sentence's `span` (character offsets in the document's text).

The output folder: `questions.jsonl` (the kept items, rewritten after every run), `tried.jsonl` (one line per try,
kept or rejected with its reason and reply, appended as it goes: a rerun skips what it holds, so an interrupted run
resumes), `generation.json` (the manifest: settings, source, model, prompt hashes, code commit and packages, counts
by reason, yield, LLM usage; a folder resumes only under the same settings, source, model and prompts) and
`config.yaml` (the resolved config). Reviews (`switchyard eval review`) go to `review.jsonl` beside them (evaluation/review.py).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
from pydantic import BaseModel

from switchyard.errors import DatasetError, UsageError
from switchyard.evaluation.jsonl import read_log_lines
from switchyard.llm.client import LLM
from switchyard.llm.prompts import (
    GENERATE_QUESTION,
    GENERATE_QUESTION_FOR_ANSWER,
    GENERATE_TWO_HOP,
    QUESTION_FOR_ANSWER_EXAMPLES,
)
from switchyard.nodes.short_answer import normalize, occurs_in
from switchyard.run_context import RunContext
from switchyard.text import content_words, split_sentences

Embed = Callable[[list[str]], np.ndarray]  # texts -> one unit vector per text (an embedder's `run`)

QUESTIONS, TRIED, MANIFEST, CONFIG = "questions.jsonl", "tried.jsonl", "generation.json", "config.yaml"
GENERATED_TYPE, TWO_HOP_TYPE = "generated", "generated-two-hop"
MAX_MENTIONS = 32  # passages per name considered for two-hop pairs
SENTENCE_MATCH = 0.8  # difflib ratio at which a quoted sentence counts as the passage's own
ANSWER_SOURCES = ("model", "passage")  # who picks the answer: the LLM, or `answer_candidates` before the call
PROMPTS = {  # the prompts each answer source uses (their hashes are in the manifest)
    "model": {"GENERATE_QUESTION": GENERATE_QUESTION, "GENERATE_TWO_HOP": GENERATE_TWO_HOP},
    "passage": {
        "GENERATE_QUESTION_FOR_ANSWER": GENERATE_QUESTION_FOR_ANSWER,
        "QUESTION_FOR_ANSWER_EXAMPLES": json.dumps(QUESTION_FOR_ANSWER_EXAMPLES),
    },
}
_NAME = re.compile(r"\b[A-Z][\w'-]+(?: (?:of |de |von |van )?[A-Z][\w'-]+)+")
_LEADING = re.compile(r"^(?:The|A|An|In|On|At|By|From|Since|When) ")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}} (?:{_MONTHS}) \d{{3,4}}\b|\b(?:{_MONTHS}) \d{{1,2}}, \d{{3,4}}\b"
)
_NUMBER = re.compile(r"(?<![\w-])\d+(?:[.,]\d+)*(?: ?%| percent)?(?![\w-])")
_WORD_NAME = re.compile(r"(?<!^)(?<![.!?] )\b[A-Z][a-z]{2,}\b")  # one capitalised word, not a sentence's first
_COPULA = re.compile(r"\b(?:is|was|are|were) (?:an? |the )?([^,;:()]+?)(?:,| who | which | that |[.!?]*$)")


@dataclass(frozen=True)
class Settings:
    """What shapes a generated set; a folder resumes only under the settings it was started with."""

    size: int = 50  # items to keep
    max_tries: int = 0  # 0: three tries per item wanted
    seed: int = 0
    two_hop: float = 0.0  # share of the tries that are two-hop
    min_chars: int = 200
    max_answer_words: int = 8
    max_copy: float = 0.5
    max_similar: float = 0.92
    max_passage_chars: int = 2000
    max_tokens: int = 200
    answers: str = "model"  # "passage": the answer is picked from a sentence first, the LLM writes only the question

    def __post_init__(self):
        if self.size < 1 or self.max_tries < 0 or self.min_chars < 0 or self.max_answer_words < 1:
            raise UsageError("generation: size >= 1, max_tries >= 0, min_chars >= 0 and max_answer_words >= 1")
        if self.answers not in ANSWER_SOURCES:
            raise UsageError(f"generation: answers must be one of {', '.join(ANSWER_SOURCES)}, not {self.answers!r}")
        if self.answers == "passage" and self.two_hop:
            raise UsageError("generation: two-hop items need answers from the model (--answers model)")
        for name in ("two_hop", "max_copy", "max_similar"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UsageError(f"generation: {name} must be between 0 and 1")

    @property
    def tries(self) -> int:
        return self.max_tries or 3 * self.size


@dataclass(frozen=True)
class SourcePassage:
    doc_id: str
    chunk_id: str
    source: str
    title: str
    text: str
    start_char: int = 0


class QuestionReply(BaseModel):
    question: str


class GeneratedReply(QuestionReply):
    answer: str
    supporting_sentence: str


@dataclass
class Attempt:
    """One try: its passages (one, or A and B), the reply, and the verdict."""

    n: int
    passages: list[SourcePassage]
    entity: str = ""
    reply: dict | None = None
    reason: str = ""  # empty: kept
    span: tuple[int, int] | None = None
    usage: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return "+".join(p.chunk_id for p in self.passages)


# -- the checks, pure ---------------------------------------------------------------------------------------------
def _trigrams(text: str) -> set[tuple[str, ...]]:
    words = normalize(text).split()
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def copy_ratio(question: str, passage: str) -> float:
    """Share of the question's word trigrams (normalised: case, punctuation, articles) found in the passage."""
    grams = _trigrams(question)
    return len(grams & _trigrams(passage)) / len(grams) if grams else 0.0


def _own_sentences(text: str) -> list[tuple[int, int]]:
    """Offsets of the passage's sentences, each line split on its own (a heading is not part of the next line)."""
    spans, cursor = [], 0
    for line in text.splitlines(keepends=True):
        for own in split_sentences(line):
            start = text.find(own, cursor)
            if start >= 0:
                spans.append((start, start + len(own)))
        cursor += len(line)
    return spans


def locate_sentence(sentence: str, text: str) -> tuple[int, int] | None:
    """Offsets in `text` of the quoted `sentence`: where it occurs exactly, else the passage sentence it nearly
    matches (difflib ratio >= SENTENCE_MATCH over normalised text); None when it is not the passage's."""
    quoted = sentence.strip().strip("\"'")
    if not quoted:
        return None
    at = text.find(quoted)
    if at >= 0:
        return at, at + len(quoted)
    best, where = 0.0, None
    target = normalize(quoted)
    for start, end in _own_sentences(text):
        ratio = difflib.SequenceMatcher(None, target, normalize(text[start:end])).ratio()
        if ratio > best:
            best, where = ratio, (start, end)
    return where if best >= SENTENCE_MATCH else None


def locate_support(quoted: str, answer: str, text: str) -> tuple[int, int] | None:
    """The span of the passage that the quote stands for and that holds the answer: the whole quote, else the first
    of its sentences that does (a model often quotes two sentences, or one with a typo)."""
    for piece in [quoted, *split_sentences(quoted)]:
        span = locate_sentence(piece, text)
        if span is not None and occurs_in(answer, text[slice(*span)]):
            return span
    return None


def check_item(reply: GeneratedReply, answer_passage: str, all_text: str, settings: Settings, entity: str = ""):
    """(reason, span): the first check the reply fails (empty: none) and, when it passes, the supporting sentence's
    offsets in `answer_passage`. `all_text`: every passage of the item (the copy check's haystack)."""
    question, answer = reply.question.strip(), reply.answer.strip()
    if not question or not answer or len(answer.split()) > settings.max_answer_words:
        return ("answer_too_long" if question and answer else "unparsable"), None
    if occurs_in(answer, question):
        return "answer_in_question", None
    if len(content_words(answer) & content_words(question)) >= 2:  # "The gender of X is female." for "female"
        return "answer_restates_question", None
    if not (content_words(question) - content_words(answer)) & content_words(all_text):
        return "off_topic", None  # no word of the passage: the prompt's example, or "Which sentence is odd?"
    span = locate_support(reply.supporting_sentence, answer, answer_passage)
    if span is None or not occurs_in(answer, answer_passage):
        return "unsupported", None
    if copy_ratio(question, all_text) > settings.max_copy:
        return "copied", None
    if entity and occurs_in(entity, question):
        return "bridge_named", None
    return "", span


def answer_candidates(sentence: str, max_words: int, exclude: str = "") -> list[str]:
    """Short answers a sentence states, in order: dates, numbers, names (capitalised words, not the sentence's
    first), then what follows its first "is / was" up to a comma or a relative clause ("The occupation of X is
    pharmacologist." gives "pharmacologist"). Left out: those longer than `max_words` words, those that name the
    subject (`exclude`, the document's title: occurring in it, or holding all of its words, as "Ellery Mountain
    Tramway" for "Ellery Tramway") and those inside an earlier candidate."""
    found = [m.group(0) for m in _DATE.finditer(sentence)]
    found += [m.group(0) for m in _NUMBER.finditer(sentence)]
    runs = sorted(names(sentence), key=sentence.find)
    found += runs + [w for w in _WORD_NAME.findall(sentence) if not any(occurs_in(w, run) for run in runs)]
    copula = _COPULA.search(sentence)
    if copula:
        found.append(copula.group(1).strip())
    subject = content_words(exclude)
    out: list[str] = []
    for answer in found:
        if not answer or len(answer.split()) > max_words:
            continue
        if exclude and (occurs_in(answer, exclude) or (subject and subject <= content_words(answer))):
            continue
        if not any(occurs_in(answer, earlier) for earlier in out):
            out.append(answer)
    return out


def pick_answer(passage: SourcePassage, settings: Settings) -> tuple[str, str] | None:
    """(sentence, answer) for an answer-first try, seeded by the passage: a random sentence of those that state a
    candidate (`answer_candidates`), then a random candidate of it; None when no sentence does."""
    rng = random.Random(f"{settings.seed}:{passage.chunk_id}")
    options = []
    for start, end in _own_sentences(passage.text):
        sentence = passage.text[start:end].strip()
        candidates = answer_candidates(sentence, settings.max_answer_words, exclude=passage.title)
        if candidates and len(sentence.split()) >= 4:
            options.append((sentence, candidates))
    if not options:
        return None
    sentence, candidates = rng.choice(options)
    return sentence, rng.choice(candidates)


# -- sampling -----------------------------------------------------------------------------------------------------
def sample_passages(passages: list[SourcePassage], n: int, seed: int) -> list[SourcePassage]:
    """Up to `n` passages, stratified over documents: documents shuffled, one passage of each per round."""
    rng = random.Random(seed)
    by_doc: dict[str, list[SourcePassage]] = defaultdict(list)
    for p in passages:
        by_doc[p.doc_id].append(p)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    for doc in docs:
        rng.shuffle(by_doc[doc])
    out: list[SourcePassage] = []
    while len(out) < n and any(by_doc[d] for d in docs):
        for doc in docs:
            if by_doc[doc] and len(out) < n:
                out.append(by_doc[doc].pop())
    return out


def names(text: str) -> set[str]:
    """Runs of two or more capitalised words on one line ("Mary Calder", "River Lune"), a leading "The" dropped."""
    found = {_LEADING.sub("", m.group(0)) for m in _NAME.finditer(text)}
    return {name for name in found if " " in name}


def sample_pairs(passages: list[SourcePassage], n: int, seed: int) -> list[tuple[SourcePassage, SourcePassage, str]]:
    """Up to `n` (A, B, name): passages of different documents that both mention `name`, B the document titled by
    it where there is one; seeded, each passage in at most one pair as A."""
    if n <= 0:
        return []
    rng = random.Random(seed + 1)
    mentions: dict[str, list[SourcePassage]] = defaultdict(list)
    for p in passages:
        for name in names(p.text):
            mentions[name].append(p)
    candidates = []
    for name in sorted(mentions):
        seen = mentions[name]
        if len(seen) > MAX_MENTIONS:  # a name in thousands of chunks ("United States"): a seeded sample of them
            seen = random.Random(f"{seed}:{name}").sample(seen, MAX_MENTIONS)
        about = [p for p in seen if name.lower() in p.title.lower()]
        for b in about or seen:
            candidates += [(a, b, name) for a in seen if a.doc_id != b.doc_id]
    rng.shuffle(candidates)
    out: list[tuple[SourcePassage, SourcePassage, str]] = []
    used: set[str] = set()
    for a, b, name in candidates:
        if a.chunk_id not in used and len(out) < n:
            used.add(a.chunk_id)
            out.append((a, b, name))
    return out


def planned_attempts(passages: list[SourcePassage], settings: Settings) -> list[Attempt]:
    """Every try in order: try i is two-hop when floor((i + 1) * two_hop) > floor(i * two_hop)."""
    usable = [p for p in passages if len(p.text) >= settings.min_chars]
    n_pairs = sum(int((i + 1) * settings.two_hop) > int(i * settings.two_hop) for i in range(settings.tries))
    pairs = iter(sample_pairs(usable, n_pairs, settings.seed))
    singles = iter(sample_passages(usable, settings.tries, settings.seed))
    out = []
    for i in range(settings.tries):
        two = int((i + 1) * settings.two_hop) > int(i * settings.two_hop)
        item = next(pairs, None) if two else None
        if item:
            out.append(Attempt(i, [item[0], item[1]], entity=item[2]))
            continue
        single = next(singles, None)
        if single is not None:
            out.append(Attempt(i, [single]))
    return out


# -- the generator ------------------------------------------------------------------------------------------------
def _answer_first_user(title: str, text: str, sentence: str, answer: str, clip: int) -> str:
    return f"Passage ({title}): {text[:clip]}\n\nSentence: {sentence}\nAnswer: {answer}"


class QuestionGenerator:
    """`run(attempt)` asks the LLM for the attempt's item and checks it (not the duplicate check: `generate_set`
    holds the kept questions)."""

    def __init__(self, llm: LLM, settings: Settings):
        self.llm, self.settings = llm, settings

    def _messages(self, attempt: Attempt, picked: tuple[str, str] | None = None) -> list[dict]:
        clip = self.settings.max_passage_chars
        if picked:
            (p,) = attempt.passages
            shown = []
            for title, sentence, answer, question in QUESTION_FOR_ANSWER_EXAMPLES:
                shown += [
                    {"role": "user", "content": _answer_first_user(title, sentence, sentence, answer, clip)},
                    {"role": "assistant", "content": json.dumps({"question": question})},
                ]
            user = _answer_first_user(p.title, p.text, *picked, clip)
            return [
                {"role": "system", "content": GENERATE_QUESTION_FOR_ANSWER},
                *shown,
                {"role": "user", "content": user},
            ]
        if attempt.entity:
            a, b = attempt.passages
            system = GENERATE_TWO_HOP.format(entity=attempt.entity)
            user = f"Passage A ({a.title}): {a.text[:clip]}\n\nPassage B ({b.title}): {b.text[:clip]}"
        else:
            (p,) = attempt.passages
            system, user = GENERATE_QUESTION, f"Passage ({p.title}): {p.text[:clip]}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def run(self, attempt: Attempt) -> Attempt:
        picked = None
        if self.settings.answers == "passage":
            picked = pick_answer(attempt.passages[0], self.settings)
            if picked is None:
                attempt.reason = "no_answer"  # no sentence of the passage states a short answer: nothing asked
                return attempt
        schema: type[QuestionReply] = QuestionReply if picked else GeneratedReply
        fallback = (
            QuestionReply(question="") if picked else GeneratedReply(question="", answer="", supporting_sentence="")
        )
        run = RunContext()
        with run.metered() as spent:
            result = self.llm.structured(
                self._messages(attempt, picked), schema, fallback, max_tokens=self.settings.max_tokens, run=run
            )
        attempt.usage = {"llm_calls": spent.llm_calls, "prompt_tokens": spent.prompt_tokens,
                         "completion_tokens": spent.completion_tokens}  # fmt: skip
        if result.status == "fallback":
            attempt.reason = "unparsable"
            attempt.reply = {"raw": result.raw[:500]}
            return attempt
        if picked:
            reply = GeneratedReply(question=result.value.question, answer=picked[1], supporting_sentence=picked[0])
        else:
            reply = cast(GeneratedReply, result.value)
        attempt.reply = reply.model_dump()
        answer_passage = attempt.passages[-1].text
        all_text = "\n".join(p.text for p in attempt.passages)
        attempt.reason, attempt.span = check_item(reply, answer_passage, all_text, self.settings, attempt.entity)
        return attempt


def item_record(attempt: Attempt) -> dict:
    """The kept attempt as a question of the plain JSONL format, with its provenance."""
    reply = attempt.reply or {}
    provenance = []
    for i, p in enumerate(attempt.passages):
        entry: dict = {"doc_id": p.doc_id, "source": p.source, "chunk_id": p.chunk_id}
        if i == len(attempt.passages) - 1 and attempt.span:
            entry["span"] = [p.start_char + attempt.span[0], p.start_char + attempt.span[1]]
            entry["sentence"] = p.text[slice(*attempt.span)]
        provenance.append(entry)
    record = {
        "id": f"gen-{attempt.n:04d}",
        "question": reply.get("question", "").strip(),
        "answers": [reply.get("answer", "").strip()],
        "gold_doc_ids": list(dict.fromkeys(p.doc_id for p in attempt.passages)),
        "type": TWO_HOP_TYPE if attempt.entity else GENERATED_TYPE,
        "provenance": provenance,
    }
    if attempt.entity:
        record["entity"] = attempt.entity
    return record


def _tried_line(attempt: Attempt, record: dict | None) -> dict:
    line = {"n": attempt.n, "key": attempt.key, "reason": attempt.reason or "kept", "reply": attempt.reply,
            "usage": attempt.usage}  # fmt: skip
    if record:
        line["item"] = record
    return line


@dataclass
class GenerationDone:
    out: Path
    kept: int
    tried: int
    reasons: dict[str, int]
    asked: int  # tries made by this run (the rest were resumed)

    @property
    def yield_rate(self) -> float:
        return self.kept / self.tried if self.tried else 0.0


def read_tried(out: Path) -> list[dict]:
    return [json.loads(line) for line in read_log_lines(out / TRIED)]


def generate_set(
    passages: list[SourcePassage],
    out: str | Path,
    llm: LLM,
    embed: Embed,
    settings: Settings,
    manifest: dict,
    progress: bool | None = None,
) -> GenerationDone:
    """Try planned attempts until `settings.size` items are kept or the tries run out; resumes `out`'s tries.
    `manifest`: what describes the run besides the settings (source, model, config), written to generation.json."""
    from tqdm import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_settings(out, settings, manifest)
    attempts = planned_attempts(passages, settings)
    if not attempts:
        raise DatasetError(f"no passage of at least {settings.min_chars} characters to generate from")
    tried = {t["key"]: t for t in read_tried(out)}
    kept = [t["item"] for t in sorted(tried.values(), key=lambda t: t["n"]) if t.get("item")]
    vectors = list(embed([k["question"] for k in kept])) if kept else []
    generator = QuestionGenerator(llm, settings)
    asked = 0
    _write_manifest(out, settings, manifest, tried)
    try:  # interrupted (Ctrl-C, SIGTERM): what was tried so far is still written out
        with (out / TRIED).open("a", encoding="utf-8") as log, tqdm(
            total=settings.size, initial=min(len(kept), settings.size), desc="generate", unit="item",
            disable=not progress if progress is not None else None,
        ) as bar:  # fmt: skip
            for attempt in attempts:
                if len(kept) >= settings.size:
                    break
                if attempt.key in tried:
                    continue
                generator.run(attempt)
                asked += 1
                record = None
                if not attempt.reason:
                    record = item_record(attempt)
                    vector = embed([record["question"]])[0]
                    if vectors and float(np.max(np.stack(vectors) @ vector)) >= settings.max_similar:
                        attempt.reason = "duplicate"
                        record = None
                    else:
                        vectors.append(vector)
                        kept.append(record)
                        bar.update(1)
                line = _tried_line(attempt, record)
                log.write(json.dumps(line, ensure_ascii=False) + "\n")
                log.flush()
                tried[attempt.key] = line
    finally:
        write_questions(out, kept)
        reasons = _write_manifest(out, settings, manifest, tried)
    return GenerationDone(out, len(kept), len(tried), reasons, asked)


def write_questions(out: Path, kept: Iterable[dict]) -> None:
    tmp = out / f".{QUESTIONS}.tmp"
    tmp.write_text("".join(json.dumps(k, ensure_ascii=False) + "\n" for k in kept), encoding="utf-8")
    tmp.replace(out / QUESTIONS)


def _write_manifest(out: Path, settings: Settings, manifest: dict, tried: dict[str, dict]) -> dict[str, int]:
    reasons = dict(Counter(t["reason"] for t in tried.values()).most_common())
    kept = reasons.get("kept", 0)
    usage: Counter[str] = Counter()
    for t in tried.values():
        usage.update(t.get("usage") or {})
    body = {
        **manifest,
        "settings": asdict(settings),
        "tried": len(tried),
        "kept": kept,
        "yield": round(kept / len(tried), 4) if tried else None,
        "reasons": reasons,
        "usage": dict(usage),
    }
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out / MANIFEST)
    return reasons


def _check_same_settings(out: Path, settings: Settings, manifest: dict) -> None:
    path = out / MANIFEST
    if not path.exists():
        return
    before = json.loads(path.read_text(encoding="utf-8"))
    recorded = {**asdict(Settings()), **before.get("settings", {})}  # a setting added since: its default
    changed = [k for k, v in asdict(settings).items() if k != "size" and recorded.get(k) != v]
    changed += [k for k in ("source", "model", "prompts") if before.get(k) != manifest.get(k)]
    if changed:
        raise UsageError(
            f"{out} holds a set generated with other settings ({', '.join(changed)}): use another --out, or the "
            "same settings to resume it (--size may grow)"
        )


# -- where passages come from -------------------------------------------------------------------------------------
def passages_from_paths(paths: list[str | Path], chunker) -> list[SourcePassage]:
    """The chunks of the files (and folders) as `switchyard ingest` would index them with this chunker."""
    from switchyard.retrievers.documents import SourceDocument
    from switchyard.retrievers.loaders import load_paths

    out, errors = [], []
    for doc in load_paths(paths):
        if not isinstance(doc, SourceDocument):
            errors.append(str(doc))
            continue
        for c in chunker.run(doc, ""):
            out.append(SourcePassage(c.doc_id, c.chunk_id, c.source, c.title, c.text, c.start_char))
    if not out:
        raise DatasetError(
            f"no documents read from {', '.join(map(str, paths))}" + (f": {errors[0]}" if errors else "")
        )
    return out


def passages_from_store(store) -> list[SourcePassage]:
    """The chunks of an indexed collection."""
    if not store.exists():
        raise DatasetError(f"collection {store.collection!r} not found in {store.uri}")
    rows = store.scan(["doc_id", "chunk_id", "source", "title", "text", "start_char"]).to_pylist()
    if not rows:
        raise DatasetError(f"collection {store.collection!r} is empty")
    return [
        SourcePassage(
            r["doc_id"], r["chunk_id"], r["source"] or "", r["title"] or "", r["text"] or "", int(r["start_char"] or 0)
        )  # fmt: skip
        for r in sorted(rows, key=lambda r: r["chunk_id"])
    ]


def generate_question_set(
    config,
    out: str | Path,
    settings: Settings,
    paths: list[str | Path] | None = None,
    progress: bool | None = None,
) -> GenerationDone:
    """`switchyard eval generate`: a question set from `paths` (chunked with the config's chunker), or without paths
    from the config's collection (`store`), by the config's LLM (and its reply cache), deduplicated with its
    embedder."""
    import yaml

    from switchyard.evaluation.manifest import code_state, package_versions
    from switchyard.llm.factory import build_llm, llm_identity
    from switchyard.retrievers.stack import RetrievalStack

    stack = RetrievalStack(config)
    try:
        if paths:
            passages = passages_from_paths(paths, stack.chunker)
            source: dict = {"paths": [str(p) for p in paths]}
        else:
            passages = passages_from_store(stack.store)
            source = {"collection": config.store.collection, "store": str(config.store.uri)}
        embedder = stack.embedder
        embedder.warm_up()
        llm = build_llm(config.llm)
        identity = llm_identity(config.llm)
        out = Path(out)
        manifest = {
            "format": "switchyard-generated-set/1",
            "source": source,
            "model": {"backend": config.llm.backend, "model": str(identity["model"])},
            "prompts": {
                name: hashlib.sha256(text.encode()).hexdigest()[:16] for name, text in PROMPTS[settings.answers].items()
            },
            "passages": len(passages),
            "documents": len({p.doc_id for p in passages}),
            "code": code_state((out,)),
            "packages": package_versions(),
        }
        out.mkdir(parents=True, exist_ok=True)
        (out / CONFIG).write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        return generate_set(passages, out, llm, embedder.run, settings, manifest, progress)
    finally:
        stack.close()
