"""evaluation/stats.py on hand-computed / textbook cases, and the paired comparison of evaluation/report.py on
synthetic rows (no models)."""

import json
import math

import numpy as np
import pytest
from scipy import stats as st

from switchyard.evaluation import stats
from switchyard.evaluation.rows import EvalRow

Z = 1.959964 + 0.841621  # z_{0.975} + z_{0.8}


def _strict_json(text: str):
    """json.loads that refuses NaN / Infinity (which json.dumps writes by default and other parsers reject)."""

    def bad(name):
        raise ValueError(f"non-finite number in JSON: {name}")

    return json.loads(text, parse_constant=bad)


class TestQuestionMeans:
    def test_averages_runs_within_each_question(self):
        assert stats.question_means([("q1", 1.0), ("q2", 0.0), ("q1", 0.0), ("q2", 0.5)]) == {"q1": 0.5, "q2": 0.25}


class TestBootstrapCi:
    def test_matches_scipy_bca_on_the_same_values_and_seed(self):
        values = [0.1, -0.3, 0.5, 0.0, 0.2, 0.7, -0.1, 0.4]
        ci = stats.bootstrap_ci(values, seed=3)
        ref = st.bootstrap(
            (np.array(values),), np.mean, method="BCa", n_resamples=9999, rng=np.random.default_rng(3)
        ).confidence_interval
        assert ci["method"] == "BCa" and ci["mean"] == pytest.approx(np.mean(values))
        assert (ci["low"], ci["high"]) == pytest.approx((ref.low, ref.high))

    def test_deterministic_under_the_seed(self):
        values = list(np.random.default_rng(1).normal(size=40))
        assert stats.bootstrap_ci(values) == stats.bootstrap_ci(values)
        assert stats.bootstrap_ci(values, seed=1) != stats.bootstrap_ci(values, seed=2)

    def test_all_equal_gives_a_zero_width_interval(self):
        assert stats.bootstrap_ci([0.25] * 6) == {"mean": 0.25, "low": 0.25, "high": 0.25, "method": "degenerate"}
        assert stats.bootstrap_ci([0.0]) == {"mean": 0.0, "low": 0.0, "high": 0.0, "method": "degenerate"}
        with pytest.raises(ValueError):
            stats.bootstrap_ci([])

    def test_falls_back_to_percentile_when_bca_is_nan(self, monkeypatch):
        calls = []
        real = st.bootstrap

        def fake(data, statistic, **kw):
            calls.append(kw["method"])
            res = real(data, statistic, **kw)
            if kw["method"] == "BCa":
                res.confidence_interval = type(res.confidence_interval)(float("nan"), float("nan"))
            return res

        monkeypatch.setattr(stats._st, "bootstrap", fake)
        ci = stats.bootstrap_ci([0.0, 1.0, 0.5, 0.25])
        assert calls == ["BCa", "percentile"] and ci["method"] == "percentile" and ci["low"] < ci["high"]


class TestSignFlipPvalue:
    def test_exact_for_few_questions(self):
        # 5 differences all +1: of the 2^5 sign patterns only all + and all - reach |mean| >= 1 → 2/32
        assert stats.sign_flip_pvalue([1, 1, 1, 1, 1]) == pytest.approx(2 / 32)
        # [0, 0.5, 0.5]: |mean| >= 1/3 when both 0.5 have the same sign (the 0 flips freely) → 4/8
        assert stats.sign_flip_pvalue([0.0, 0.5, 0.5]) == pytest.approx(0.5)

    def test_no_difference_is_p_one(self):
        assert stats.sign_flip_pvalue([0.0, 0.0, 0.0]) == 1.0 and stats.sign_flip_pvalue([]) == 1.0
        assert stats.sign_flip_pvalue([0.5]) == 1.0  # one question: both signs are as extreme as the observed


class TestMajorityOutcome:
    def test_majority_and_even_split(self):
        assert stats.majority_outcome([True, False, True]) is True
        assert stats.majority_outcome([False, False, True]) is False
        assert stats.majority_outcome([True, False]) is True  # even split: the first run decides
        assert stats.majority_outcome([False, True]) is False
        with pytest.raises(ValueError):
            stats.majority_outcome([])


class TestMcnemarCounts:
    def test_discordant_counts(self):
        pairs = [(True, False), (True, False), (False, True), (True, True), (False, False)]
        assert stats.mcnemar_counts(pairs) == (2, 1, 5)


class TestMcnemarExact:
    def test_small_tables(self):
        assert stats.mcnemar_exact(0, 5) == pytest.approx(2 * 0.5**5)  # 0.0625
        assert stats.mcnemar_exact(5, 0) == pytest.approx(0.0625)
        assert stats.mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)  # 0.021484375
        assert stats.mcnemar_exact(0, 6) == pytest.approx(2 / 64)  # 0.03125, the first below 0.05

    def test_balanced_and_empty_tables(self):
        assert stats.mcnemar_exact(4, 4) == 1.0 and stats.mcnemar_exact(0, 0) == 1.0
        with pytest.raises(ValueError):
            stats.mcnemar_exact(-1, 2)


class TestHolm:
    def test_textbook_case(self):
        # sorted: 0.01 (rank 1, × 3 = 0.03), 0.03 (rank 2, × 2 = 0.06), 0.04 (rank 3, × 1 = 0.04, but never below
        # the previous adjusted value: max(0.06, 0.04) = 0.06); back in input order [0.01, 0.04, 0.03]:
        assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])

    def test_capped_at_one_monotone_and_single(self):
        assert stats.holm([0.5, 0.6]) == [1.0, 1.0]  # 0.5 × 2 = 1.0; 0.6 × 1 → max(1.0, 0.6)
        assert stats.holm([0.4, 0.45]) == pytest.approx([0.8, 0.8])  # 0.45 × 1 = 0.45 < 0.8 → 0.8
        assert stats.holm([0.04]) == [0.04] and stats.holm([]) == []

    def test_none_is_not_a_test(self):
        assert stats.holm([0.01, None, 0.04]) == pytest.approx([0.02, None, 0.04])


class TestMdeMean:
    def test_known_case_and_scaling(self):
        assert stats.z_sum() == pytest.approx(Z, abs=1e-6)
        assert stats.mde_mean(1.0, 100) == pytest.approx(Z / 10, abs=1e-6)  # 0.2801585
        assert stats.mde_mean(1.0, 400) == pytest.approx(stats.mde_mean(1.0, 100) / 2)  # 1/sqrt(n)
        assert stats.mde_mean(0.5, 100) == pytest.approx(stats.mde_mean(1.0, 100) / 2)  # ∝ SD
        assert stats.mde_mean(1.0, 0) is None


class TestQuestionsNeededMean:
    def test_inverse_of_the_mde(self):
        # SD 1, difference 0.05: (2.801585 / 0.05)^2 = 3139.55 → 3140 questions
        assert stats.questions_needed_mean(1.0, 0.05) == 3140
        assert stats.questions_needed_mean(0.3, 0.05) == math.ceil((Z * 0.3 / 0.05) ** 2)
        assert stats.mde_mean(1.0, stats.questions_needed_mean(1.0, 0.05)) <= 0.05
        assert stats.questions_needed_mean(1.0, 0.0) is None


class TestMdeMcnemar:
    def test_connor_sample_size_hand_computed(self):
        # delta 0.1, psi 0.2: (1.959964·√0.2 + 0.841621·√0.19)^2 / 0.01 = (0.876523 + 0.366854)^2 / 0.01 = 154.6
        assert stats._connor_n(0.1, 0.2, 0.05, 0.8) == pytest.approx(154.60, abs=0.01)
        assert stats.questions_needed_mcnemar(0.2, 0.1) == 155

    def test_mde_solves_connor_for_n(self):
        mde = stats.mde_mcnemar(0.2, 155)
        assert mde == pytest.approx(0.1, abs=5e-4) and stats._connor_n(mde, 0.2, 0.05, 0.8) == pytest.approx(155)
        # small differences: close to the simple normal approximation (z_a + z_b) · sqrt(psi / n)
        assert stats.mde_mcnemar(0.05, 10000) == pytest.approx(Z * math.sqrt(0.05 / 10000), rel=0.01)
        assert stats.mde_mcnemar(0.2, 400) == pytest.approx(stats.mde_mcnemar(0.2, 100) / 2, rel=0.05)

    def test_edges(self):
        assert stats.mde_mcnemar(0.0, 100) is None and stats.mde_mcnemar(0.2, 0) is None
        # all discordant, 2 questions: even delta = 1 needs 1.96^2 = 3.84 questions → capped at 1
        assert stats.mde_mcnemar(1.0, 2) == 1.0


class TestQuestionsNeededMcnemar:
    def test_impossible_differences(self):
        assert stats.questions_needed_mcnemar(0.03, 0.05) is None  # a 0.05 shift needs >= 5% discordant questions
        assert stats.questions_needed_mcnemar(0.2, 0.0) is None


class TestNullPlanning:
    def test_planning_values(self):
        assert stats.null_binary_sd(0.5) == pytest.approx(math.sqrt(0.5))
        assert stats.null_binary_sd(0.1) == pytest.approx(math.sqrt(2 * 0.1 * 0.9))
        assert stats.null_binary_sd(1.0) == stats.null_binary_sd(0.0) == pytest.approx(math.sqrt(0.5))
        assert stats.null_discordant_rate(0.1) == pytest.approx(0.18) and stats.null_discordant_rate(0.0) == 0.5


def _row(config, run, qid, f1, contains=None, exact=None, abstained=False):
    return EvalRow(
        config=config,
        run=run,
        id=qid,
        exact_match=float(f1 == 1) if exact is None else exact,
        f1=f1,
        contains=f1 if contains is None else contains,
        gold_recall=None,
        citation_precision=None,
        abstained=abstained,
        latency_ms=100.0,
        llm_calls=1,
        prompt_tokens=1,
        completion_tokens=1,
        parse_fallbacks=0,
        guards={},
        error=None,
        difficulty="1",
        type="t",
    )


class TestPairedReport:
    def test_bootstrap_resamples_questions_not_runs(self):
        from switchyard.evaluation.report import paired

        # 2 questions × 5 runs; every run of q1 differs by +0.2, every run of q2 by +0.8
        rows = [_row("base", r, q, 0.0) for r in range(5) for q in ("q1", "q2")]
        rows += [_row("new", r, "q1", 0.2) for r in range(5)] + [_row("new", r, "q2", 0.8) for r in range(5)]
        res = paired(rows, "base")["new"]["f1"]
        two = st.bootstrap(
            (np.array([0.2, 0.8]),), np.mean, method="BCa", rng=np.random.default_rng(stats.SEED)
        ).confidence_interval
        ten = st.bootstrap(
            (np.array([0.2] * 5 + [0.8] * 5),), np.mean, method="BCa", rng=np.random.default_rng(stats.SEED)
        ).confidence_interval
        assert res["mean_diff"] == pytest.approx(0.5) and res["ci95"] == pytest.approx([two.low, two.high])
        assert res["ci95"][1] - res["ci95"][0] > ten.high - ten.low + 0.2  # that of 2 values, not of 10
        assert (res["n"], res["n_pairs"], res["runs_per_question"]) == (2, 10, 5.0)
        assert (res["wins"], res["losses"], res["ties"]) == (2, 0, 0)  # questions, not (run, question) pairs
        assert res["sd_diff"] == pytest.approx(np.std([0.2, 0.8], ddof=1))
        assert res["minimum_detectable_difference"] == pytest.approx(stats.mde_mean(res["sd_diff"], 2))
        assert paired(rows, "base") == paired(rows, "base")  # seeded

    def test_runs_are_averaged_per_question_over_shared_runs(self):
        from switchyard.evaluation.report import paired

        rows = [
            _row("base", 0, "q1", 0.0),
            _row("base", 1, "q1", 0.0),
            _row("base", 0, "q2", 1.0),
            _row("new", 0, "q1", 1.0),
            _row("new", 1, "q1", 0.0),
            _row("new", 0, "q2", 1.0),
            _row("new", 1, "q2", 0.0),
        ]  # base has no run 1 of q2: that pair is not used
        res = paired(rows, "base")["new"]["f1"]
        assert res["mean_diff"] == pytest.approx((0.5 + 0.0) / 2) and (res["n"], res["n_pairs"]) == (2, 3)
        assert (res["wins"], res["losses"], res["ties"]) == (1, 0, 1)

    def test_identical_configs_are_degenerate_but_valid(self, tmp_path):
        from switchyard.evaluation.report import write_report

        rows = [_row(c, 0, f"q{i}", float(i % 2)) for c in ("base", "same") for i in range(6)]
        report = write_report(rows, tmp_path, "t", baseline="base")
        parsed = _strict_json((tmp_path / "report.json").read_text())
        f1 = parsed["paired"]["same"]["f1"]
        assert f1["mean_diff"] == 0.0 and f1["ci95"] == [0.0, 0.0] and f1["ci_method"] == "degenerate"
        assert f1["p"] == 1.0 and f1["p_holm"] == 1.0
        # no spread: the MDE uses the planning SD of independent binary scores at the pooled mean 0.5
        assert f1["sd_source"] == "binary_null" and f1["sd_diff"] == pytest.approx(math.sqrt(0.5))
        assert f1["minimum_detectable_difference"] == pytest.approx(Z * math.sqrt(0.5) / math.sqrt(6), abs=1e-5)
        em = parsed["mcnemar"]["same"]["exact_match"]
        assert (em["b"], em["c"], em["p"], em["discordant_source"]) == (0, 0, 1.0, "binary_null")
        assert report["paired"]["same"]["f1"]["mean_diff"] == 0.0

    def test_mcnemar_majority_over_runs_and_holm_across_configs(self):
        from switchyard.evaluation.report import CONTAINS_THRESHOLD, mcnemar

        rows = []
        for i in range(10):  # baseline: never an exact match, contains 0.4 (below the threshold)
            rows += [_row("base", r, f"q{i}", 0.0, contains=0.4) for r in range(3)]
            # "a": an exact match in 2 of 3 runs on every question → the majority outcome is a match; b = 10
            rows += [_row("a", r, f"q{i}", 1.0 if r < 2 else 0.0, contains=CONTAINS_THRESHOLD) for r in range(3)]
            # "b": an exact match in 1 of 3 runs → the majority is no match; b = c = 0
            rows += [_row("b", r, f"q{i}", 1.0 if r == 0 else 0.0, contains=0.0) for r in range(3)]
        res = mcnemar(rows, "base")
        a, b = res["a"]["exact_match"], res["b"]["exact_match"]
        assert (a["b"], a["c"], a["n"]) == (10, 0, 10) and a["p"] == pytest.approx(2 * 0.5**10)
        assert (b["b"], b["c"], b["p"]) == (0, 0, 1.0)
        assert a["p_holm"] == pytest.approx(2 * a["p"]) and b["p_holm"] == 1.0  # Holm over the two configs
        contains = res["a"][f"contains>={CONTAINS_THRESHOLD}"]
        assert (contains["b"], contains["rate"], contains["baseline_rate"]) == (10, 1.0, 0.0)
        assert a["minimum_detectable_difference"] == pytest.approx(stats.mde_mcnemar(1.0, 10))
        assert set(res["a"]) == {"exact_match", f"contains>={CONTAINS_THRESHOLD}", "abstained"}

    def test_report_json_and_markdown_end_to_end(self, tmp_path):
        from switchyard.evaluation.report import write_report

        rng = np.random.default_rng(7)
        rows = []
        for name, shift in (("fixed", 0.0), ("agent", 0.1), ("closed", -0.3)):
            for r in range(2):
                for i in range(30):
                    f1 = float(np.clip(0.5 + shift + rng.normal(0, 0.3), 0, 1))
                    rows.append(_row(name, r, f"q{i}", f1, abstained=bool(rng.random() < 0.1)))
        write_report(rows, tmp_path, "synthetic")
        report = _strict_json((tmp_path / "report.json").read_text())
        assert report["baseline"] == "fixed" and set(report["paired"]) == set(report["mcnemar"]) == {"agent", "closed"}
        for name in ("agent", "closed"):
            for m in ("f1", "contains"):
                res = report["paired"][name][m]
                assert {
                    "diff",
                    "mean_diff",
                    "ci95",
                    "ci_method",
                    "p",
                    "p_holm",
                    "wins",
                    "losses",
                    "ties",
                    "n",
                    "n_pairs",
                    "runs_per_question",
                    "sd_diff",
                    "sd_source",
                    "minimum_detectable_difference",
                    "questions_needed",
                } <= set(res)
                assert res["n"] == 30 and res["n_pairs"] == 60 and res["wins"] + res["losses"] + res["ties"] == 30
                assert res["ci95"][0] <= res["mean_diff"] <= res["ci95"][1] and res["p_holm"] >= res["p"]
            for test in report["mcnemar"][name].values():
                assert {"b", "c", "n", "p", "p_holm", "minimum_detectable_difference", "questions_needed"} <= set(test)
        assert report["paired"]["closed"]["f1"]["ci95"][1] < 0 and report["statistics"]["alpha"] == 0.05
        md = (tmp_path / "report.md").read_text()
        assert "MDE (80% power)" in md and "## Exact McNemar tests against fixed" in md
        assert "| closed | f1 | -0." in md and "Questions needed to detect a difference of 0.05" in md
        mde = report["paired"]["agent"]["f1"]["minimum_detectable_difference"]
        assert f"±{mde:.3f} |" in md


class TestParetoFront:
    def test_dominated_configs_are_left_out_and_the_front_runs_by_cost(self):
        points = {
            "agent": (6.0, 0.6),
            "fixed": (2.0, 0.5),
            "no-llm": (0.0, 0.2),
            "slow": (7.0, 0.4),
            "same-cost-worse": (2.0, 0.45),
            "twin": (2.0, 0.5),
        }
        assert stats.pareto_front(points) == ["no-llm", "fixed", "twin", "agent"]
        assert stats.pareto_front({"a": (1.0, 0.5)}) == ["a"] and stats.pareto_front({}) == []


class TestRunsDoNotShrinkIntervals:
    def test_copying_every_run_leaves_every_question_level_result_unchanged(self):
        from switchyard.evaluation.report import aggregate

        # scores in quarters: a mean of three equal copies is exactly the value (BCa's bias correction counts
        # bootstrap means below the observed one, so float noise of 1e-17 could move the interval slightly)
        rng = np.random.default_rng(11)
        one = []
        for i in range(25):
            base, new = rng.integers(0, 5, size=2) / 4
            one += [_row("base", 0, f"q{i}", float(base)), _row("new", 0, f"q{i}", float(new))]
        three = [
            r.model_copy(update={"run": run}) for run in range(3) for r in one
        ]  # the same answers, three times over
        a, b = aggregate(one), aggregate(three)
        for m in ("f1", "contains"):
            pa, pb = a["paired"]["new"][m], b["paired"]["new"][m]
            assert (pb["n"], pb["n_pairs"]) == (25, 75)
            for key in ("ci95", "p", "minimum_detectable_difference", "wins", "questions_needed"):
                assert pb[key] == pa[key]
        assert b["mcnemar"]["new"]["exact_match"] == a["mcnemar"]["new"]["exact_match"]
        assert b["configs"]["new"]["ci95"] == a["configs"]["new"]["ci95"]


class TestPlots:
    def _rows(self):
        rows = []
        # (config, F1, LLM calls): no-llm cheap and weak, fixed in between, agent dearer and better, slow dominated
        for name, f1, calls in (("fixed", 0.5, 2), ("no-llm", 0.2, 0), ("agent", 0.7, 6), ("slow", 0.4, 7)):
            for run in range(2):
                for i in range(8):
                    rows.append(
                        _row(name, run, f"q{i}", f1 + (0.1 if i % 2 else -0.1)).model_copy(
                            update={
                                "llm_calls": calls + run,
                                "prompt_tokens": 100 * calls,
                                "completion_tokens": 10,
                                "latency_ms": 1000.0 * (calls + 1),
                                "difficulty": str(1 + i % 2),
                            }
                        )
                    )
        return rows

    def test_pngs_are_written_listed_and_linked_with_the_frontier(self, tmp_path):
        from matplotlib.image import imread

        from switchyard.evaluation.report import write_report

        write_report(self._rows(), tmp_path, "plots", plot_metric="f1")
        report = _strict_json((tmp_path / "report.json").read_text())
        files = [f["file"] for f in report["plots"]["files"]]
        assert (
            files
            == [
                "accuracy_by_difficulty.png",
                "accuracy_vs_llm_calls.png",
                "accuracy_vs_tokens.png",
                "accuracy_vs_latency.png",
            ]
            and report["plots"]["metric"] == "f1"
        )
        md = (tmp_path / "report.md").read_text()
        for f in report["plots"]["files"]:
            image = imread(tmp_path / f["file"])
            assert image.shape[0] > 200 and image.shape[1] > 300 and image.std() > 0  # a drawn picture
            assert f"![{f['caption']}]({f['file']})" in md
        assert report["plots"]["frontier"] == {
            cost: ["no-llm", "fixed", "agent"] for cost in ("llm_calls", "tokens", "latency_p50_ms")
        }
        assert "frontier by LLM calls / question: no-llm → fixed → agent" in md

    def test_costs_and_accuracy_intervals_in_the_report(self, tmp_path):
        from switchyard.evaluation.report import write_report

        report = write_report(self._rows(), tmp_path, "plots", plot_metric="contains")
        fixed = report["configs"]["fixed"]
        assert fixed["tokens"]["mean"] == 210 and fixed["tokens"]["sd"] == 0.0
        assert fixed["llm_calls"]["mean"] == 2.5 and fixed["llm_calls"]["sd"] == pytest.approx(math.sqrt(0.5))
        ci = fixed["ci95"]["f1"]
        assert ci["mean"] == pytest.approx(0.5) and ci["low"] < 0.5 < ci["high"] and ci["method"] == "BCa"
        assert report["plots"]["metric"] == "contains"
        md = (tmp_path / "report.md").read_text()
        assert f"| f1 | {ci['mean']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}] |" in md

    def test_error_bars_of_an_estimate(self):
        from switchyard.evaluation.plots import Estimate

        assert Estimate(0.5, 0.4, 0.7).error() == pytest.approx((0.1, 0.2))
        assert Estimate(0.5).error() == (0.0, 0.0)
