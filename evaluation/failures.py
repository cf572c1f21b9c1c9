"""Failure modes of an answered question, detected from its row: the agent's step records (nodes/router.py) and, for
abstention, the gold documents. One small detector per mode, each returning how many times the mode occurred in
the row (0: not at all); `count_failures` sums them per config as questions affected and occurrences.

A step record is the router's decision (`step`, `action`, `args`, `guard`, its LLM usage with `parse_fallbacks`
and, only when a reply needed the repair round, `repairs`), then what the action observed. Rows without step
records (the fixed pipeline, no-llm, a failed question) can show only the modes read from the row itself
(abstained_with_gold_retrieved).
"""

from __future__ import annotations

from collections.abc import Callable

from switchyard.evaluation.rows import EvalRow

ENDING_ACTIONS = ("answer", "abstain", "reply")
NEEDS_PASSAGES = ("rerank", "grade")  # actions that work on passages a retrieve step found
WRONG_ACTION_GUARDS = ("premature_answer", "needs_documents", "ungrounded_query")


def _steps(row: EvalRow) -> list[dict]:
    return [] if row.error else list(row.steps or [])


def malformed_repaired(row: EvalRow) -> int:
    """Router replies that did not parse or validate (JSON decision or tool call) and did after the one repair
    round: the sum of the steps' `repairs`."""
    return sum(int(s.get("repairs") or 0) for s in _steps(row))


def malformed_unrepaired(row: EvalRow) -> int:
    """Router steps whose reply stayed invalid after the repair round: the step fell back to the fixed pipeline's
    next edge (guard `invalid`), or one of its structured calls fell back (`parse_fallbacks` > 0, e.g. the plan
    of a plan-react step). One per step."""
    return sum(1 for s in _steps(row) if s.get("guard") == "invalid" or (s.get("parse_fallbacks") or 0) > 0)


def wrong_or_impossible_action(row: EvalRow) -> int:
    """Steps where the model chose an action the state did not allow:
    - answer before any passage was retrieved (guard `premature_answer`, overridden);
    - a direct reply to a question that needs documents (guard `needs_documents`, overridden);
    - a rewrite/retrieve query sharing no content word with the question, query or passages (guard
      `ungrounded_query`, the query dropped);
    - rerank or grade chosen by the model (no guard) before any retrieve step ran: there were no passages to
      rerank or grade, the step did nothing.
    Actions a guard substituted (repeat, invalid, budget) are the router's, not the model's, and never count."""
    count, retrieved = 0, False
    for s in _steps(row):
        guard, action = s.get("guard"), s.get("action")
        if guard in WRONG_ACTION_GUARDS or (guard is None and action in NEEDS_PASSAGES and not retrieved):
            count += 1
        retrieved = retrieved or action == "retrieve"
    return count


def loop_stopped(row: EvalRow) -> int:
    """Steps the repeat guard stopped: the same action with the same arguments on an unchanged state, replaced by
    the fixed pipeline's next edge (guard `repeat`)."""
    return sum(1 for s in _steps(row) if s.get("guard") == "repeat")


def finished_before_retrieval(row: EvalRow) -> int:
    """1 when the run ended (answer, abstain or a direct reply as its last step) before any retrieve step ran."""
    steps = _steps(row)
    if not steps or steps[-1].get("action") not in ENDING_ACTIONS:
        return 0
    return int(not any(s.get("action") == "retrieve" for s in steps[:-1]))


def abstained_with_gold_retrieved(row: EvalRow) -> int:
    """1 when the run abstained although a gold document was among what it retrieved (any config, agent or not)."""
    if row.error or not row.abstained or not row.gold_doc_ids:
        return 0
    return int(bool(set(row.retrieved_doc_ids or []) & set(row.gold_doc_ids)))


def budget_exhausted(row: EvalRow) -> int:
    """1 when router.max_steps decisions were made and the router had to answer or abstain (guard `budget`)."""
    return int(any(s.get("guard") == "budget" for s in _steps(row)))


DETECTORS: dict[str, Callable[[EvalRow], int]] = {
    "malformed_repaired": malformed_repaired,
    "malformed_unrepaired": malformed_unrepaired,
    "wrong_or_impossible_action": wrong_or_impossible_action,
    "loop_stopped": loop_stopped,
    "finished_before_retrieval": finished_before_retrieval,
    "abstained_with_gold_retrieved": abstained_with_gold_retrieved,
    "budget_exhausted": budget_exhausted,
}


def detect(row: EvalRow) -> dict[str, int]:
    """Occurrences of every failure mode in one row."""
    return {mode: detector(row) for mode, detector in DETECTORS.items()}


def count_failures(rows: list[EvalRow]) -> dict[str, dict[str, dict[str, int]]]:
    """{config: {"rows": rows counted, "modes": {mode: {"questions": rows showing it, "events": occurrences}}}},
    every mode present; a row is one (run, question), so with several runs "questions" counts each run's."""
    out: dict = {}
    for row in rows:
        per = out.setdefault(row.config, {"rows": 0, "modes": {m: {"questions": 0, "events": 0} for m in DETECTORS}})
        per["rows"] += 1
        for mode, n in detect(row).items():
            per["modes"][mode]["questions"] += int(n > 0)
            per["modes"][mode]["events"] += n
    return out
