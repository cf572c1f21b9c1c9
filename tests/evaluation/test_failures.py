"""The failure-mode detectors on constructed traces: each fires on its case, none on a clean trace."""

import pytest

from switchyard.evaluation.failures import DETECTORS, count_failures, detect
from switchyard.evaluation.report import aggregate, markdown
from switchyard.evaluation.rows import EvalRow


def step(n, action, guard=None, args=None, **extra):
    """One router step record as nodes/router.py writes it (usage fields included, timing left out)."""
    return {
        "step": n,
        "thought": "",
        "action": action,
        "args": args or {},
        "guard": guard,
        "llm_calls": 1,
        "prompt_tokens": 300,
        "completion_tokens": 20,
        "parse_fallbacks": 0,
        **extra,
        "observation": "",
        "action_ms": 1.0,
        "action_llm_calls": 0,
    }


CLEAN = [
    step(1, "rewrite"),
    step(2, "retrieve", args={"query": "who is ada"}),
    step(3, "rerank"),
    step(4, "grade"),
    step(5, "answer"),
]


def row(steps=None, config="react-json", abstained=False, retrieved=("d1", "d2"), gold=("d9",), error=None):
    return EvalRow(
        config=config,
        run=0,
        id="q1",
        question="who is ada",
        answers=["x"],
        gold_doc_ids=list(gold),
        prediction="" if abstained else "x",
        abstained=abstained,
        error=error,
        steps=steps,
        retrieved_doc_ids=list(retrieved),
    )


def fired(r):
    return {mode for mode, n in detect(r).items() if n}


class TestDetectors:
    def test_a_clean_trace_shows_no_failure(self):
        assert fired(row(CLEAN)) == set()

    def test_rows_without_steps_show_none_of_the_step_modes(self):
        assert fired(row(None, config="fixed")) == set()
        assert fired(row(None, config="fixed", abstained=True, retrieved=("d9",))) == {"abstained_with_gold_retrieved"}

    def test_malformed_repaired_counts_the_repairs(self):
        steps = [step(1, "rewrite", repairs=1), *CLEAN[1:3], step(4, "grade", repairs=2), CLEAN[4]]
        r = row(steps)
        assert fired(r) == {"malformed_repaired"} and detect(r)["malformed_repaired"] == 3

    @pytest.mark.parametrize(
        "bad", [step(1, "rewrite", guard="invalid", parse_fallbacks=1), step(1, "rewrite", parse_fallbacks=1)]
    )
    def test_malformed_unrepaired_is_an_invalid_guard_or_a_fallback(self, bad):
        assert fired(row([bad, *CLEAN[1:]])) == {"malformed_unrepaired"}

    @pytest.mark.parametrize("guard", ["premature_answer", "needs_documents", "ungrounded_query"])
    def test_wrong_action_guards(self, guard):
        r = row([step(1, "rewrite", guard=guard), *CLEAN[1:]])
        assert fired(r) == {"wrong_or_impossible_action"}

    def test_rerank_or_grade_chosen_before_any_retrieval_is_impossible(self):
        r = row([step(1, "grade"), step(2, "rerank"), *CLEAN])
        assert fired(r) == {"wrong_or_impossible_action"} and detect(r)["wrong_or_impossible_action"] == 2

    def test_a_guard_substituted_rerank_is_not_the_models_choice(self):
        assert "wrong_or_impossible_action" not in fired(row([step(1, "rerank", guard="repeat"), *CLEAN[1:]]))

    def test_rerank_after_retrieval_is_allowed(self):
        assert fired(row([*CLEAN[1:4], step(4, "rerank", guard=None), CLEAN[4]])) == set()

    def test_loop_stopped_counts_repeat_guards(self):
        r = row(
            [
                *CLEAN[:4],
                step(5, "retrieve", guard="repeat", args={"query": "who is ada"}),
                step(6, "answer", guard="repeat"),
            ]
        )
        assert fired(r) == {"loop_stopped"} and detect(r)["loop_stopped"] == 2

    def test_finished_before_retrieval(self):
        assert fired(
            row([step(1, "rewrite"), step(2, "abstain", args={"reason": "unknown"})], abstained=True, retrieved=())
        ) == {"finished_before_retrieval"}

    def test_abstained_with_gold_retrieved(self):
        r = row([*CLEAN[:4], step(5, "abstain")], abstained=True, retrieved=("d1", "d9"))
        assert fired(r) == {"abstained_with_gold_retrieved"}

    def test_abstaining_when_no_gold_was_retrieved_is_not_that_failure(self):
        assert fired(row([*CLEAN[:4], step(5, "abstain")], abstained=True, retrieved=("d1",))) == set()

    def test_budget_exhausted(self):
        r = row([*CLEAN[:4], step(5, "rewrite"), step(6, "answer", guard="budget")])
        assert fired(r) == {"budget_exhausted"}

    def test_a_failed_question_shows_nothing(self):
        assert fired(row([step(1, "rewrite", guard="invalid")], error="LLMError: boom")) == set()


class TestCounts:
    def test_questions_and_events_per_config(self):
        rows = [row([step(1, "grade"), step(2, "grade"), *CLEAN]), row(CLEAN), row(None, config="fixed")]
        counts = count_failures(rows)
        assert counts["react-json"]["rows"] == 2 and counts["fixed"]["rows"] == 1
        assert counts["react-json"]["modes"]["wrong_or_impossible_action"] == {"questions": 1, "events": 2}
        assert set(counts["fixed"]["modes"]) == set(DETECTORS)

    def test_the_report_has_a_failure_table(self):
        rows = [row(None, config="fixed"), row([step(1, "rewrite", guard="invalid"), *CLEAN[1:]])]
        report = aggregate(rows)
        assert report["failures"]["react-json"]["modes"]["malformed_unrepaired"]["questions"] == 1
        text = markdown(report, "t")
        assert "## Failure modes" in text and "| malformed_unrepaired | 0 (0) | 1 (1) |" in text
