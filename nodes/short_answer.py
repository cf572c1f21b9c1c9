"""Short answers: what the question asks for, whether a short answer occurs in a passage, and extractive spans.

- `question_shape`: yes/no question, a choice between named options ("Which is older, A or B?"), or open, with the
  answer type an open question expects (number, date, name, phrase).
- `occurrences` / `grounded_in`: a short answer is grounded when it occurs in a passage after normalisation
  (case, punctuation, articles; numbers with or without thousands separators and as words up to twenty; dates as
  "3 May 1990", "May 3, 1990" or "1990-05-03").
- `clean_answer` / `match_option`: the model's short answer, tidied, and mapped onto yes/no or one of the options.
- `extractive_span`: the no-LLM short answer, a span of the best sentences matching the expected type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from switchyard.retrievers.documents import Passage
from switchyard.text import content_words, strip_citations

Kind = Literal["yes_no", "choice", "open"]
Expects = Literal["number", "date", "name", "phrase"]

_AUX = {
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "has",
    "have",
    "had",
    "will",
    "would",
    "should",
    "shall",
    "may",
    "might",
    "must",
}
_CONNECT = {"of", "the", "for", "and", "&", "de", "la", "von", "van", "der", "du", "le", "y"}
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_WORD = re.compile(r"[\w'’&.-]+")


@dataclass(frozen=True)
class QuestionShape:
    kind: Kind
    expects: Expects = "phrase"
    options: list[str] = field(default_factory=list)


def question_shape(question: str) -> QuestionShape:
    q = " ".join(question.split()).rstrip("?").strip()
    words = q.split()
    first = words[0].lower() if words else ""
    options = _options(q)
    if options:
        return QuestionShape("choice", "phrase", options)
    if first in _AUX:
        return QuestionShape("yes_no")
    return QuestionShape("open", _expected_type(q.lower()))


def _options(q: str) -> list[str]:
    """The two named options of "..., A or B" / "... A or B": right = after the last " or ", left = the capitalised
    run of words just before it (or, after a comma, everything from the comma)."""
    between = re.search(r"\b[Bb]etween (.+?) and (.+?)(?:,|\s+(?:who|which|what|whose)\b|$)", q)
    if between:
        return [between.group(1).strip(" ,\"'"), between.group(2).strip(" ,\"'")]
    if " or " not in q:
        return []
    head, right = q.rsplit(" or ", 1)
    right = right.strip(" ,")
    if "," in head:
        left = head.rsplit(",", 1)[1].strip()
        if not left or len(left.split()) > 8:
            left = ""
    else:
        left = ""
    if not left:
        run: list[str] = []
        for word in reversed(head.split()):
            if word[:1].isupper() or word[:1].isdigit() or (run and word.lower() in _CONNECT):
                run.append(word)
            else:
                break
        while run and run[-1].lower() in _CONNECT:  # a run never starts with "of"/"the"
            run.pop()
        left = " ".join(reversed(run))
    if not left or not right or len(right.split()) > 8:
        return []
    return [left.strip(" ,\"'"), right.strip(" ,\"'")]


def _expected_type(q: str) -> Expects:
    if q.startswith(("how many", "how much", "how old", "how long", "how tall", "how far", "what percentage")):
        return "number"
    if (
        q.startswith(("when", "what year", "in what year", "in which year", "what date", "on what date"))
        or " what year" in q
        or " which year" in q
    ):
        return "date"
    if q.startswith(("who", "whom", "whose", "where", "which", "what is the name", "what was the name")) or re.match(
        r"(what|which) (\w+ )?(person|city|country|team|company|band|film|actor|author|state|"
        r"university|town|county|group|club|name|magazine|album|song|novel|show|series)",
        q,
    ):
        return "name"
    return "phrase"


# -- normalisation and occurrence ---------------------------------------------------------------------------------
def normalize(text: str) -> str:
    text = strip_citations(text).lower().replace("’", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 -> 1000
    text = re.sub(r"[^\w\s'-]", " ", text).replace("'s ", " ").replace("-", " ")
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def variants(answer: str) -> set[str]:
    """Normalised forms of a short answer: itself, numbers as digits / words, dates in their usual orders."""
    base = normalize(answer)
    out = {base} if base else set()
    for i, word in enumerate(_NUMBER_WORDS):
        out |= {re.sub(rf"\b{word}\b", str(i), v) for v in list(out)}
        out |= {re.sub(rf"\b{i}\b", word, v) for v in list(out)}
    date = _parse_date(base)
    if date:
        y, m, d = date
        month = _MONTHS[m - 1]
        out |= {f"{d} {month} {y}", f"{month} {d} {y}", f"{y} {m:02d} {d:02d}"}
    return {v for v in out if v}


def _parse_date(text: str) -> tuple[int, int, int] | None:
    months = "|".join(_MONTHS)
    for pattern, order in (
        (rf"^(\d{{1,2}}) ({months}) (\d{{3,4}})$", "dmy"),
        (rf"^({months}) (\d{{1,2}}) (\d{{3,4}})$", "mdy"),
        (r"^(\d{3,4}) (\d{1,2}) (\d{1,2})$", "ymd"),
    ):
        m = re.match(pattern, text)
        if m:
            parts = dict(zip(order, m.groups()))
            month = _MONTHS.index(parts["m"]) + 1 if not parts["m"].isdigit() else int(parts["m"])
            if 1 <= month <= 12:
                return int(parts["y"]), month, int(parts["d"])
    return None


def occurs_in(answer: str, text: str) -> bool:
    haystack = f" {normalize(text)} "
    return any(f" {v} " in haystack for v in variants(answer))


def grounded_in(answer: str, passages: list[Passage], prefer: int | None = None) -> int | None:
    """Index of a passage the short answer occurs in (`prefer`, the one the model named, first), else None."""
    order = ([prefer] if prefer is not None and 0 <= prefer < len(passages) else []) + list(range(len(passages)))
    for j in order:
        if occurs_in(answer, f"{passages[j].title}. {passages[j].text}"):
            return j
    return None


# -- the model's answer -------------------------------------------------------------------------------------------
_LEADS = re.compile(r"^(the answer is|answer:|it is|it was|they are|he is|she is)\s*", re.I)


def clean_answer(text: str) -> str:
    text = strip_citations(" ".join((text or "").split())).strip(" \"'")
    return _LEADS.sub("", text).strip(" \"'.;:,!")


def match_option(answer: str, shape: QuestionShape) -> str | None:
    """yes/no questions: "yes" or "no"; choice questions: the option the answer names; else None (invalid)."""
    norm = normalize(answer)
    if shape.kind == "yes_no":
        word = norm.split()[0] if norm else ""
        return word if word in ("yes", "no") else None
    if shape.kind == "choice":  # the option the answer names first ("A has won more than B" -> A)
        hits = [(f" {norm} ".find(f" {normalize(o)} "), o) for o in shape.options if normalize(o)]
        named = sorted((at, o) for at, o in hits if at >= 0)
        if named:
            return named[0][1]
        within = [o for o in shape.options if norm and norm in normalize(o)]
        return within[0] if len(within) == 1 else None
    return answer or None


def sub_spans(answer: str, question: str) -> list[str]:
    """Pieces of an answer that could be the answer on their own, longest first: its parts between punctuation and
    its capitalised names, leaving out the answer itself and pieces whose words all come from the question."""
    asked = set(normalize(question).split())
    parts = {p.strip() for p in re.split(r"[–—(),:;\"]|\s-\s|\.\s", answer) if p.strip()}
    parts |= {span for span, _, _ in _names(answer)}
    out = []
    for part in sorted(parts, key=lambda x: (-len(x), x)):
        words = normalize(part).split()
        if words and part != answer and not all(w in asked for w in words):
            out.append(part)
    return out


def split_list(answer: str) -> list[str]:
    """A list answer ("A, B and C") as its items; a single answer as itself."""
    parts = [p.strip(" .") for p in re.split(r",|;|\band\b", answer) if p.strip(" .")]
    return parts if len(parts) > 1 else [answer]


# -- extractive spans (no LLM) ------------------------------------------------------------------------------------
_YEAR = re.compile(r"\b1\d{3}\b|\b20\d{2}\b")
_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_DATE = re.compile(rf"\b(?:\d{{1,2}} )?(?:{'|'.join(m.title() for m in _MONTHS)})(?: \d{{1,2}},?)? \d{{4}}\b")


def candidate_spans(sentence: str, expects: Expects, question_words: set[str]) -> list[tuple[str, float]]:
    """(span, bonus) pairs of a sentence that could answer a question expecting `expects`: dates and years for
    "when", numbers for "how many", capitalised names (more after "by", less at the sentence start, more for two
    words or more), and for other questions the words after the question's last content word ("What do blue flags
    protect?" -> "workers on a track")."""
    if expects == "date":
        return [(d, 0.3) for d in _DATE.findall(sentence)] + [(y, 0.0) for y in _YEAR.findall(sentence)]
    names = [
        (span, (0.5 if prev == "by" else 0.0) - (0.3 if start == 0 else 0.0) + (0.2 if " " in span else 0.0))
        for span, start, prev in _names(sentence)
    ]
    if expects == "number":
        return [(n.rstrip(",."), 0.3) for n in _NUMBER.findall(sentence)] + [(n, b - 0.5) for n, b in names]
    if expects == "name":
        return names
    tail = _after_question(sentence, question_words)
    return ([(tail, 0.3)] if tail else []) + [(n, b - 0.2) for n, b in names]


def _after_question(sentence: str, question_words: set[str]) -> str:
    """The words after the sentence's last word sharing a 5-letter stem with a question word, up to the clause's
    end (at most 6 words)."""
    stems = {w[:5] for w in question_words if len(w) > 3}
    ends = [m.end() for m in _WORD.finditer(sentence) if len(m.group()) > 3 and m.group().lower()[:5] in stems]
    if not ends:
        return ""
    clause = re.split(r"[,;:.!?()]", sentence[ends[-1] :], maxsplit=1)[0]
    return " ".join(clause.split()[:6])


def _names(sentence: str) -> list[tuple[str, int, str]]:
    """(span, index of its first word, the word before it) for maximal runs of capitalised words (with "of", "the"
    inside a run; a leading "The" is dropped)."""
    words = _WORD.findall(sentence)
    out: list[tuple[str, int, str]] = []
    run: list[str] = []
    start = 0
    for i, word in enumerate(words + [""]):
        if word[:1].isupper() or (word[:1].isdigit() and run):
            if not run:
                start = i
            run.append(word)
        elif run and word.lower() in _CONNECT:
            run.append(word)
        else:
            while run and run[-1].lower() in _CONNECT:
                run.pop()
            first = start
            while run and run[0].lower() in _CONNECT:
                run.pop(0)
                first += 1
            if run:
                out.append((" ".join(run).strip(".,"), start, words[start - 1].lower() if start else ""))
            run = []
    return out


def extractive_span(question: str, shape: QuestionShape, sentences: list[str]) -> str:
    """The best-scoring span of the best-ranked sentences (`sentences` come best first) that has the expected type
    and is not already in the question; empty when there is none."""
    asked = set(normalize(question).split())
    best, best_score = "", float("-inf")
    for rank, sentence in enumerate(sentences):
        for span, bonus in candidate_spans(sentence, shape.expects, asked):
            words = normalize(span).split()
            if not words or not (content_words(span) or span.isdigit()) or all(w in asked for w in words):
                continue
            score = 1.0 - 0.25 * rank + bonus
            if score > best_score:
                best, best_score = span, score
    return best
