"""rank_agreement (evaluation/agreement.py): Kendall's tau-b of two reports' config orders, on constructed reports."""

import pytest

from switchyard.evaluation.agreement import agreement_markdown, rank_agreement


def report(means: dict[str, float], paired: dict[str, float] | None = None) -> dict:
    return {
        "configs": {name: {"contains": {"mean": m}, "f1": {"mean": m / 2}} for name, m in means.items()},
        "paired": {
            name: {"contains": {"mean_diff": d, "ci95": [d - 0.1, d + 0.1], "p": 0.5, "p_holm": 1.0}}
            for name, d in (paired or {}).items()
        },
    }


LABELLED = report({"fixed": 0.6, "no-llm": 0.5, "react": 0.4, "bolaa": 0.3, "closed-book": 0.1})


def test_the_same_order_is_tau_one_and_the_reverse_minus_one():
    same = report({"fixed": 0.9, "no-llm": 0.7, "react": 0.5, "bolaa": 0.2, "closed-book": 0.0})
    reverse = report({"fixed": 0.1, "no-llm": 0.2, "react": 0.3, "bolaa": 0.4, "closed-book": 0.5})
    assert rank_agreement(LABELLED, same).tau == pytest.approx(1.0)
    assert rank_agreement(LABELLED, reverse).tau == pytest.approx(-1.0)


def test_one_adjacent_swap_of_five_is_tau_point_eight_and_only_common_configs_count():
    swapped = report({"fixed": 0.5, "no-llm": 0.6, "react": 0.4, "bolaa": 0.3, "closed-book": 0.1, "extra": 0.9})
    agreement = rank_agreement(LABELLED, swapped)
    assert agreement.configs == ["fixed", "no-llm", "react", "bolaa", "closed-book"]
    assert agreement.tau == pytest.approx(0.8) and 0 < agreement.p < 1  # 9 of 10 pairs agree


def test_a_set_scoring_every_config_the_same_has_no_tau():
    flat = report({"fixed": 0.2, "no-llm": 0.2, "react": 0.2, "bolaa": 0.2, "closed-book": 0.2})
    agreement = rank_agreement(LABELLED, flat)
    assert agreement.tau is None and "undefined" in agreement_markdown(agreement, "fixed")


def test_the_table_shows_both_paired_differences():
    labelled = report({"fixed": 0.6, "react": 0.4}, paired={"react": -0.2})
    generated = report({"fixed": 0.5, "react": 0.45}, paired={"react": -0.05})
    text = agreement_markdown(rank_agreement(labelled, generated), "fixed")
    assert "| react | 0.400 | 0.450 | -0.200 [-0.300, -0.100] p=1.00 | -0.050 [-0.150, +0.050] p=1.00 |" in text
    assert "| fixed | 0.600 | 0.500 | – | – |" in text and "tau-b of the two orders over 2 configs: +1.00" in text


def test_an_older_report_holds_the_difference_as_diff_without_p():
    older = report({"fixed": 0.6, "react": 0.4})
    older["paired"] = {"react": {"contains": {"diff": -0.2, "ci95": [-0.3, -0.1], "wins": 1, "losses": 3}}}
    text = agreement_markdown(rank_agreement(older, report({"fixed": 0.5, "react": 0.45})), "fixed")
    assert "| react | 0.400 | 0.450 | -0.200 [-0.300, -0.100] | – |" in text
