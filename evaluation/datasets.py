"""Evaluation datasets: PhantomWiki, HotpotQA-style JSON/JSONL, a plain JSONL with a corpus folder, and
conversations (MTRAG's folder as it is, or the plain JSONL with `history`).

Each loader returns an EvalSet: questions with their gold answers (alternatives, or one list of items), gold
document ids where known, difficulty and type, plus the corpus paths to ingest. A conversation's turn also carries
the dataset's own earlier turns (`history`: each turn is asked after them, never after the pipeline's own earlier
answers, so a wrong answer does not derail the turns after it), its position and a human standalone rewrite where
the dataset has one.

A conversation turn in the plain JSONL (docs/evaluation.md): `{"id", "question", "answers": [...], "history":
[{"role": "user" | "assistant", "content": ...}, ...], "turn": 2, "kind": "follow-up", "rewrite": "...",
"gold_doc_ids": [...]}`; `"type": "unanswerable"` with `"answers": []` for a turn the documents cannot answer (it is
right to abstain).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchyard.errors import DatasetError, program
from switchyard.evaluation.metrics import ATTACK_KINDS, INJECTION_TYPE, NO_DOCUMENTS_TYPES, UNANSWERABLE_TYPE

ABSTAIN_TYPES = (*NO_DOCUMENTS_TYPES, UNANSWERABLE_TYPE)  # types whose questions may have no gold answer


@dataclass
class EvalQuestion:
    id: str
    question: str
    answers: list[str]
    is_list: bool = False
    gold_doc_ids: list[str] = field(default_factory=list)
    difficulty: str = "-"
    type: str = "-"
    attack: dict | None = None  # type `injection`: {kind, canary: [...], split} (evaluation/metrics.py)
    # a conversation's turn: the dataset's earlier turns ({role, content}), its position (1 = first) and the human
    # standalone rewrite (None where the dataset has none)
    history: list[dict] = field(default_factory=list)
    turn: int | None = None
    rewrite: str | None = None


@dataclass
class EvalSet:
    name: str
    questions: list[EvalQuestion]
    corpus: list[Path]
    source: Path | None = None  # the dataset file or folder (hashed into run manifests)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"missing file: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"missing file: {path}") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc})") from None
    for n, line in enumerate(lines, start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{n}: invalid JSON ({exc.msg})") from None
    return rows


def _require(record: dict, keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in record]
    if missing:
        raise DatasetError(f"{where}: missing field(s) {', '.join(missing)}")


def load_phantomwiki(folder: Path) -> EvalSet:
    articles, questions = folder / "articles.json", folder / "questions.json"
    titles = {a.get("title") for a in _read_json(articles) if isinstance(a, dict)}
    data = _read_json(questions)
    if not isinstance(data, list):
        raise DatasetError(f"{questions}: expected a list of questions")
    out = []
    for i, q in enumerate(data):
        _require(q, ("id", "question", "answer"), f"{questions}[{i}]")
        gold: list[str] = []
        try:  # the entities on the solution path are the gold articles
            for trace in json.loads(q.get("solution_traces") or "[]"):
                gold += [v for v in trace.values() if v in titles and v not in gold]
        except (json.JSONDecodeError, AttributeError):
            pass
        answers = q["answer"] if isinstance(q["answer"], list) else [q["answer"]]
        gold += [a for a in answers if a in titles and a not in gold]
        out.append(
            EvalQuestion(
                str(q["id"]),
                q["question"],
                [str(a) for a in answers],
                is_list=True,
                gold_doc_ids=gold,
                difficulty=str(q.get("difficulty", "-")),
                type=str(q.get("type", "-")),
            )
        )
    return EvalSet(folder.name, out, [articles])


def load_hotpotqa(path: Path, cache_dir: Path) -> EvalSet:
    """HotpotQA (HF layout) JSONL or JSON list; the corpus is the union of the context paragraphs."""
    rows = _read_jsonl(path) if path.suffix == ".jsonl" else _read_json(path)
    paragraphs: dict[str, str] = {}
    out = []
    for i, r in enumerate(rows):
        _require(r, ("question", "answer", "context"), f"{path}[{i}]")
        ctx = r["context"]
        pairs = zip(ctx["title"], ctx["sentences"]) if isinstance(ctx, dict) else ((t, s) for t, s in ctx)
        for title, sentences in pairs:
            paragraphs.setdefault(title, "".join(sentences))
        facts = r.get("supporting_facts") or {}
        gold = facts.get("title", []) if isinstance(facts, dict) else [t for t, _ in facts]
        out.append(
            EvalQuestion(
                str(r.get("id", r.get("_id", i))),
                r["question"],
                [str(r["answer"])],
                gold_doc_ids=sorted(set(gold)),
                difficulty=str(r.get("level", "-")),
                type=str(r.get("type", "-")),
            )
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    body = "\n".join(json.dumps({"_id": t, "title": t, "text": x}) for t, x in sorted(paragraphs.items()))
    corpus = cache_dir / f"hotpot-corpus-{hashlib.sha256(body.encode()).hexdigest()[:12]}.jsonl"
    if not corpus.exists():
        corpus.write_text(body)
    return EvalSet(path.stem, out, [corpus])


def load_plain(path: Path, corpus: Path | None, records: list[dict] | None = None) -> EvalSet:
    """`records`: the question records already read (a generated set's, reviewed), instead of `path`'s lines."""
    if corpus is None:
        raise DatasetError(f"{path}: a plain JSONL dataset needs --corpus PATH (files or a folder to ingest)")
    if not corpus.exists():
        raise DatasetError(f"corpus not found: {corpus}")
    out = []
    for i, r in enumerate(_read_jsonl(path) if records is None else records):
        _require(r, ("id", "question", "answers"), f"{path}:{i + 1}")
        # a question needing no documents (small talk, out of scope) may have no gold answer
        if not isinstance(r["answers"], list) or not (r["answers"] or r.get("type") in ABSTAIN_TYPES):
            raise DatasetError(
                f"{path}:{i + 1}: 'answers' must be a non-empty list (empty only for the types "
                f"{', '.join(ABSTAIN_TYPES)})"
            )
        fields: dict[str, Any] = {
            "is_list": bool(r.get("list", False)),
            "gold_doc_ids": list(r.get("gold_doc_ids") or []),
            "difficulty": str(r.get("difficulty", "-")),
            "type": str(r.get("type", "-")),
            "attack": _attack(r, f"{path}:{i + 1}") if r.get("type") == INJECTION_TYPE else None,
        }
        fields.update(_turn(r, f"{path}:{i + 1}"))  # a conversation's turn: its kind is the difficulty
        out.append(EvalQuestion(str(r["id"]), r["question"], [str(a) for a in r["answers"]], **fields))
    return EvalSet(path.stem, out, [corpus])


def _turn(record: dict, where: str) -> dict:
    """A conversation turn's fields of a plain record: history (checked), turn, rewrite, and its kind as the
    question's difficulty (first / follow-up / clarification); {} for a question alone."""
    if "history" not in record:
        return {}
    from switchyard.conversation import as_dicts, as_history
    from switchyard.errors import HistoryError

    try:
        history = as_dicts(as_history(record["history"]))
    except HistoryError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    turn = record.get("turn", len([m for m in history if m["role"] == "user"]) + 1)
    if not isinstance(turn, int) or turn < 1:
        raise DatasetError(f"{where}: 'turn' must be a positive integer")
    rewrite = record.get("rewrite")
    if rewrite is not None and (not isinstance(rewrite, str) or not rewrite.strip()):
        raise DatasetError(f"{where}: 'rewrite' must be a non-empty string or null")
    out: dict = {"history": history, "turn": turn, "rewrite": rewrite}
    if "kind" in record or "difficulty" not in record:
        out["difficulty"] = str(record.get("kind") or ("first" if turn == 1 else "follow-up"))
    return out


MTRAG_TURNS, MTRAG_PASSAGES = "turns.jsonl", "passages.jsonl"
_MTRAG_KINDS = {"N/A": "first", "Follow-up": "follow-up", "Clarification": "clarification"}


def load_mtrag(folder: Path) -> EvalSet:
    """MTRAG's conversations as the shared folder holds them (turns.jsonl, passages.jsonl; its README): one question
    per user turn, after the dataset's own earlier turns; kind (first / follow-up / clarification) as difficulty,
    `<domain>/<answerability>` as type (an unanswerable turn is right when refused); the corpus is passages.jsonl
    (both domains in one collection)."""
    turns_path = folder / MTRAG_TURNS
    out = []
    for i, r in enumerate(_read_jsonl(turns_path)):
        where = f"{turns_path}:{i + 1}"
        _require(r, ("task_id", "question", "history", "turn", "gold_passage_ids", "answerability"), where)
        answerability = (r["answerability"] or ["ANSWERABLE"])[0].lower()
        unanswerable = answerability in ("unanswerable", "conversational")
        history = [
            {"role": "user" if m.get("speaker") == "user" else "assistant", "content": m.get("text")}
            for m in r["history"]
        ]
        kinds = r.get("multi_turn") or ["N/A"]
        record = {
            "history": history,
            "turn": r["turn"],
            "rewrite": r.get("rewrite"),
            "kind": _MTRAG_KINDS.get(kinds[0], str(kinds[0]).lower()),
        }
        fields = {
            "gold_doc_ids": list(r["gold_passage_ids"]),
            "type": UNANSWERABLE_TYPE if unanswerable else f"{r.get('domain', '-')}/{answerability}",
            **_turn(record, where),
        }
        answers = [] if unanswerable else [str(r.get("reference_answer") or "")]
        out.append(EvalQuestion(str(r["task_id"]), r["question"], answers, **fields))
    return EvalSet(folder.name, out, [folder / MTRAG_PASSAGES])


def _attack(record: dict, where: str) -> dict:
    """An injection question's `attack`: {"kind": one of ATTACK_KINDS, "canary": [strings], ...}."""
    attack = record.get("attack")
    if not isinstance(attack, dict) or attack.get("kind") not in ATTACK_KINDS:
        raise DatasetError(
            f"{where}: an injection question needs 'attack': {{'kind': one of {', '.join(ATTACK_KINDS)}, ...}}"
        )
    canary = attack.get("canary")
    if not isinstance(canary, list) or not canary or not all(isinstance(c, str) and c.strip() for c in canary):
        raise DatasetError(f"{where}: 'attack.canary' must be a non-empty list of strings")
    return dict(attack)


def load_generated(folder: Path, corpus: Path | None, unreviewed: bool = False) -> EvalSet:
    """A folder of `switchyard eval generate`: its reviewed items (evaluation/review.py; with `unreviewed`, also those
    without a decision), over the documents it was generated from unless `corpus` is given."""
    from switchyard.evaluation.generate import MANIFEST, QUESTIONS
    from switchyard.evaluation.review import reviewed_items

    manifest = _read_json(folder / MANIFEST)
    items, counts = reviewed_items(folder, unreviewed)
    if not items:
        raise DatasetError(
            f"{folder}: no item to score ({counts['accept']} accepted, {counts['edit']} edited, {counts['reject']} "
            f"rejected, {counts['unreviewed']} not reviewed): review it ({program()} eval review {folder}), or score the "
            "items not reviewed too with --unreviewed"
        )
    if corpus is None:
        paths = manifest.get("source", {}).get("paths")
        if not paths:
            raise DatasetError(f"{folder}: generated from a collection: give the documents it holds with --corpus PATH")
        if len(paths) > 1:
            raise DatasetError(f"{folder}: generated from several paths: give them as one folder with --corpus PATH")
        corpus = Path(paths[0])
    dataset = load_plain(folder / QUESTIONS, corpus, records=items)
    dataset.name = folder.name
    return dataset


def load_dataset(
    path: str | Path, corpus: str | Path | None = None, cache_dir: Path | None = None, unreviewed: bool = False
) -> EvalSet:
    """Detect the format: a folder with articles.json + questions.json (PhantomWiki); a folder of `switchyard eval
    generate` (generation.json); a JSON/JSONL whose records have `context` (HotpotQA); a JSONL with `answers`
    (plain, needs `corpus`). `unreviewed`: a generated set's items not reviewed are scored too."""
    dataset = _load(Path(path), corpus, cache_dir, unreviewed)
    dataset.source = Path(path)
    return dataset


def _load(path: Path, corpus: str | Path | None, cache_dir: Path | None, unreviewed: bool = False) -> EvalSet:
    if path.is_dir():
        if (path / "questions.json").exists() and (path / "articles.json").exists():
            return load_phantomwiki(path)
        if (path / MTRAG_TURNS).exists() and (path / MTRAG_PASSAGES).exists():
            return load_mtrag(path)
        from switchyard.evaluation.generate import MANIFEST

        if (path / MANIFEST).exists():
            return load_generated(path, Path(corpus) if corpus else None, unreviewed)
        raise DatasetError(
            f"{path}: a dataset folder needs articles.json and questions.json (PhantomWiki), turns.jsonl and "
            f"passages.jsonl (MTRAG conversations), or generation.json ({program()} eval generate)"
        )
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path}")
    first = _read_jsonl(path)[:1] if path.suffix == ".jsonl" else (_read_json(path) or [None])[:1]
    if not first or not isinstance(first[0], dict):
        raise DatasetError(f"{path}: no question records")
    if "context" in first[0]:
        return load_hotpotqa(path, cache_dir or Path(".switchyard") / "eval-cache")
    if "answers" in first[0]:
        return load_plain(path, Path(corpus) if corpus else None)
    raise DatasetError(f"{path}: unknown format (records need 'context' (HotpotQA) or 'answers' (plain JSONL))")
