"""Reviewing a generated question set (`switchyard eval review SET`): accept, edit or reject each item, in the terminal.

Each decision is appended to `SET/review.jsonl` as it is made (`{"id", "decision": accept|edit|reject, "question"?,
"answers"?}`; the last line of an id wins), so a review stops at any item and resumes at the first one without a
decision. `switchyard eval` scores the accepted and edited items (an edit replaces the question or the answer) and,
with `--unreviewed`, those without a decision too; a rejected item never.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from switchyard.errors import DatasetError, program
from switchyard.evaluation.generate import MANIFEST, QUESTIONS
from switchyard.evaluation.jsonl import read_log_lines

REVIEW = "review.jsonl"
SCORED_FILES = (QUESTIONS, REVIEW)  # what `eval SET` reads of a set folder: its items and the decisions on them
DECISIONS = ("accept", "edit", "reject")
KEYS = {"a": "accept", "e": "edit", "r": "reject", "s": "skip", "q": "quit"}


def read_items(folder: Path) -> list[dict]:
    path = folder / QUESTIONS
    if not path.is_file():
        raise DatasetError(f"{folder}: no {QUESTIONS} (a folder written by `{program()} eval generate`)")
    return [json.loads(line) for line in read_log_lines(path)]


def read_decisions(folder: Path) -> dict[str, dict]:
    """id -> its last decision."""
    out = {}
    for line in read_log_lines(folder / REVIEW):
        d = json.loads(line)
        if d.get("decision") in DECISIONS:
            out[str(d["id"])] = d
    return out


def reviewed_items(folder: Path, unreviewed: bool = False) -> tuple[list[dict], dict[str, int]]:
    """The items to score, edits applied: accepted and edited ones, and with `unreviewed` those without a decision;
    plus the count of each state (accept, edit, reject, unreviewed)."""
    decisions = read_decisions(folder)
    items, counts = [], {"accept": 0, "edit": 0, "reject": 0, "unreviewed": 0}
    for item in read_items(folder):
        d = decisions.get(str(item["id"]))
        state = d["decision"] if d else "unreviewed"
        counts[state] += 1
        if state == "reject" or (state == "unreviewed" and not unreviewed):
            continue
        if d and state == "edit":
            item = {
                **item,
                "question": d.get("question") or item["question"],
                "answers": d.get("answers") or item["answers"],
            }
        items.append({**item, "review": state})
    return items, counts


def _show(item: dict, index: int, total: int, write: Callable[[str], None]) -> None:
    write(f"\n[{index}/{total}] {item['id']} ({item.get('type', '-')})")
    for p in item.get("provenance", []):
        write(
            f"  from {p.get('source') or p['doc_id']} ({p['chunk_id']})"
            + (f": {p['sentence']}" if p.get("sentence") else "")
        )
    write(f"  Q: {item['question']}")
    write(f"  A: {' | '.join(item['answers'])}")


def review(folder: Path, read: Callable[[str], str] = input, write: Callable[[str], None] = print) -> dict[str, int]:
    """Walk the items without a decision: a(ccept), e(dit), r(eject), s(kip), q(uit). Returns the counts after."""
    items = read_items(folder)
    decided = read_decisions(folder)
    todo = [item for item in items if str(item["id"]) not in decided]
    write(f"{len(items)} items, {len(items) - len(todo)} reviewed, {len(todo)} to go")
    with (folder / REVIEW).open("a", encoding="utf-8") as log:
        for i, item in enumerate(todo, start=1):
            _show(item, len(items) - len(todo) + i, len(items), write)
            try:
                key = ""
                while KEYS.get(key) is None:
                    key = read("  [a]ccept [e]dit [r]eject [s]kip [q]uit: ").strip().lower()[:1]
            except EOFError:
                break
            action = KEYS[key]
            if action == "quit":
                break
            if action == "skip":
                continue
            line: dict = {"id": item["id"], "decision": action}
            if action == "edit":
                try:
                    question = read("  question (Enter keeps it): ").strip()
                    answer = read("  answer (Enter keeps it): ").strip()
                except EOFError:
                    break
                line["question"] = question or item["question"]
                line["answers"] = [answer] if answer else item["answers"]
            log.write(json.dumps(line, ensure_ascii=False) + "\n")
            log.flush()
    return reviewed_items(folder, unreviewed=True)[1]


def set_summary(folder: Path) -> dict | None:
    """Where a generated set came from and what of it is scored, for a run manifest and report.md; None when
    `folder` is not a generated set."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    generation = json.loads(path.read_text(encoding="utf-8"))
    return {
        "model": generation.get("model"),
        "source": generation.get("source"),
        "tried": generation.get("tried"),
        "kept": generation.get("kept"),
        "reasons": generation.get("reasons"),
        "review": reviewed_items(Path(folder), unreviewed=True)[1],
    }


def describe_set(summary: dict) -> str:
    """One line: `generated by local smollm2 from samples/corpus: kept 3 of 9 tried; reviewed: ...`."""
    model = summary.get("model") or {}
    source = summary.get("source") or {}
    where = ", ".join(source.get("paths") or []) or f"collection {source.get('collection')}"
    review = summary.get("review") or {}
    reviewed = ", ".join(f"{n} {state}" for state, n in review.items() if n) or "none"
    return (
        f"generated by {model.get('backend')} {model.get('model')} from {where}: kept {summary.get('kept')} of "
        f"{summary.get('tried')} tried; items: {reviewed}"
    )
