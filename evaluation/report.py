"""Aggregate per-question results into tables (report.md), numbers (report.json) and plots (PNG).

Per config, each metric is averaged within a run, then reported as mean ± sample SD over the runs (SD needs >= 2
runs; with one run it is shown as "±–"). Breakdowns by difficulty and type pool all runs.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from switchyard.evaluation import manifest as run_manifest
from switchyard.evaluation import stats
from switchyard.evaluation.failures import DETECTORS, count_failures
from switchyard.evaluation.plots import Estimate, bars, frontier
from switchyard.evaluation.ranking import percentile
from switchyard.evaluation.rows import EvalRow

# latency percentiles are over the rows the model answered; `replayed_rows` counts those answered (at least in part)
# from the LLM reply cache, whose latency is a file read's
METRICS = [
    "exact_match",
    "f1",
    "contains",
    "gold_recall",
    "citation_precision",
    "faithfulness",
    "answer_similarity",
    "answer_relevance",
    "context_relevance",
    "recall_at_5",
    "ndcg_at_10",
    "abstention_rate",
    "correct_abstention_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "replayed_rows",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "parse_fallbacks",
    "guard_activations",
    "errors",
    "timeouts",
    "judge_fallbacks",
    "relevance_fallbacks",
]
# the research's metrics (evaluation/research_metrics.py, switchyard eval --metrics) and a conversation turn's retrieval
# against its gold passages: shown, with a bootstrap interval per config and paired against the baseline, only when
# some row has them
RESEARCH = ("answer_similarity", "answer_relevance", "context_relevance", "recall_at_5", "ndcg_at_10")
# only when an LLM judge ran (switchyard eval --judge) or the research's metrics were asked for
OPTIONAL = {"faithfulness", "judge_fallbacks", *RESEARCH, "relevance_fallbacks"}
ACCURACY = ("f1", "contains", "exact_match")  # per-question scores with a bootstrap interval per config


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def run_metrics(rows: list[EvalRow]) -> dict[str, float | None]:
    abstained = [r for r in rows if r.abstained]
    lat = [r.latency_ms for r in rows if not r.cached_calls]
    return {
        "exact_match": _mean([r.exact_match for r in rows]),
        "f1": _mean([r.f1 for r in rows]),
        "contains": _mean([r.contains for r in rows]),
        "gold_recall": _mean([r.gold_recall for r in rows]),
        "citation_precision": _mean([r.citation_precision for r in rows]),
        "faithfulness": _mean([r.faithfulness for r in rows]),
        **{m: _mean([getattr(r, m) for r in rows]) for m in RESEARCH},
        "abstention_rate": len(abstained) / len(rows),
        # an abstention is "correct" when the run searched and nothing it retrieved was gold (nothing to answer
        # from); giving up without searching is not, however unanswerable the question then looked
        "correct_abstention_rate": _mean(
            [float(r.gold_recall == 0 and bool(r.retrieved_doc_ids)) for r in abstained if r.gold_recall is not None]
        ),
        "latency_p50_ms": percentile(lat, 50) if lat else None,
        "latency_p95_ms": percentile(lat, 95) if lat else None,
        "replayed_rows": sum(1 for r in rows if r.cached_calls),
        "llm_calls": _mean([r.llm_calls for r in rows]),
        "prompt_tokens": _mean([r.prompt_tokens for r in rows]),
        "completion_tokens": _mean([r.completion_tokens for r in rows]),
        "parse_fallbacks": _mean([r.parse_fallbacks for r in rows]),
        "guard_activations": _mean([sum(r.guards.values()) for r in rows]),
        "errors": sum(1 for r in rows if r.error),
        "timeouts": sum(1 for r in rows if "timed out" in (r.error or "")),  # LLM calls past llm.timeout_s
        "judge_fallbacks": _mean([r.judge_fallbacks for r in rows]),
        "relevance_fallbacks": _mean([r.relevance_fallbacks for r in rows]),
    }


CONTAINS_THRESHOLD = 0.5  # a question counts as answered ("contains") when at least this share of gold occurs
MDE_TARGET = 0.05  # report.md says how many questions a difference this large would need
# binary outcomes per (run, question) for the exact McNemar tests
BINARY_OUTCOMES = {
    "exact_match": lambda r: r.exact_match == 1,
    f"contains>={CONTAINS_THRESHOLD}": lambda r: (r.contains or 0.0) >= CONTAINS_THRESHOLD,
    "abstained": lambda r: bool(r.abstained),
}
STATISTICS = {
    "unit": "question: each question's runs shared by config and baseline are reduced to one value first",
    "mean_diff": "per question, the mean over shared runs of config minus baseline; averaged over questions",
    "ci95": f"scipy.stats.bootstrap over questions, BCa (percentile when BCa is degenerate; a zero-width interval "
    f"when all differences are equal), {int(stats.CONFIDENCE * 100)}%, seed {stats.SEED}",
    "p": "two-sided paired sign-flip randomization test over questions (exact for <= 13 questions)",
    "mcnemar": "exact McNemar test on the per-question majority outcome over shared runs (an even split is decided "
    "by the lowest shared run); b = config only, c = baseline only, p = binomtest(b, b + c, 0.5)",
    "p_holm": "Holm step-down adjustment over all configs compared with the baseline, per metric / outcome",
    "minimum_detectable_difference": f"at {int(stats.POWER * 100)}% power, alpha {stats.ALPHA} two-sided: mean "
    "differences (z_{1-a/2} + z_power) * SD_d / sqrt(questions), SD_d the SD of the "
    "per-question differences (if 0, the planning SD sqrt(2p(1-p)) of independent "
    "binary scores at the pooled mean p); McNemar outcomes Connor's approximation "
    "at the observed discordant rate (if 0, the planning rate 2p(1-p))",
    "questions_needed": f"questions needed to detect a difference of {MDE_TARGET} at the same SD / discordant rate",
    "alpha": stats.ALPHA,
    "power": stats.POWER,
    "contains_threshold": CONTAINS_THRESHOLD,
    "mde_target": MDE_TARGET,
}


def _shared(rows: list[EvalRow], baseline: str) -> dict:
    """{config: {question: [(run, config row, baseline row), …] in run order}} over the (run, question) pairs that
    config and baseline both have, for every config but the baseline (configs with no shared pair are left out)."""
    base = {(r.run, r.id): r for r in rows if r.config == baseline}
    out: dict = {}
    for name in dict.fromkeys(r.config for r in rows):
        if name == baseline:
            continue
        mine = {(r.run, r.id): r for r in rows if r.config == name}
        keys = sorted(set(mine) & set(base), key=lambda k: (str(k[1]), k[0]))
        per_q: dict = {}
        for run, qid in keys:
            per_q.setdefault(qid, []).append((run, mine[(run, qid)], base[(run, qid)]))
        if per_q:
            out[name] = per_q
    return out


def _mean_comparison(per_q: dict, metric: str, resamples: int) -> dict:
    if metric in RESEARCH:  # a metric that can be None: only the runs both configs have a value for are paired
        per_q = {
            q: kept
            for q, pairs in per_q.items()
            if (kept := [p for p in pairs if getattr(p[1], metric) is not None and getattr(p[2], metric) is not None])
        }
    qdiffs = [
        sum(getattr(m, metric) - getattr(b, metric) for _, m, b in pairs) / len(pairs) for pairs in per_q.values()
    ]
    n, n_pairs = len(qdiffs), sum(len(p) for p in per_q.values())
    ci = stats.bootstrap_ci(qdiffs, resamples=resamples)
    sd = statistics.stdev(qdiffs) if n >= 2 else 0.0
    sd_source = "observed"
    if sd == 0:  # no spread observed: an MDE of 0 would claim infinite resolution; plan with binary scores
        pooled = _mean([getattr(x, metric) for pairs in per_q.values() for _, m, b in pairs for x in (m, b)]) or 0.0
        sd, sd_source = stats.null_binary_sd(pooled), "binary_null"
    return {
        "diff": ci["mean"],
        "mean_diff": ci["mean"],
        "ci95": [ci["low"], ci["high"]],
        "ci_method": ci["method"],
        "p": stats.sign_flip_pvalue(qdiffs),
        "wins": sum(d > 0 for d in qdiffs),
        "losses": sum(d < 0 for d in qdiffs),
        "ties": sum(d == 0 for d in qdiffs),
        "n": n,
        "n_pairs": n_pairs,
        "runs_per_question": n_pairs / n,
        "sd_diff": sd,
        "sd_source": sd_source,
        "minimum_detectable_difference": stats.mde_mean(sd, n),
        "questions_needed": {"difference": MDE_TARGET, "questions": stats.questions_needed_mean(sd, MDE_TARGET)},
    }


def _mcnemar_comparison(per_q: dict, outcome) -> dict:
    pairs = [
        (stats.majority_outcome([outcome(m) for _, m, _ in p]), stats.majority_outcome([outcome(b) for *_, b in p]))
        for p in per_q.values()
    ]
    b, c, n = stats.mcnemar_counts(pairs)
    psi, source = (b + c) / n, "observed"
    if psi == 0:
        pooled = _mean([float(x) for pair in pairs for x in pair]) or 0.0
        psi, source = stats.null_discordant_rate(pooled), "binary_null"
    return {
        "b": b,
        "c": c,
        "n": n,
        "diff": (b - c) / n,
        "p": stats.mcnemar_exact(b, c),
        "rate": sum(m for m, _ in pairs) / n,
        "baseline_rate": sum(x for _, x in pairs) / n,
        "discordant_rate": psi,
        "discordant_source": source,
        "minimum_detectable_difference": stats.mde_mcnemar(psi, n),
        "questions_needed": {"difference": MDE_TARGET, "questions": stats.questions_needed_mcnemar(psi, MDE_TARGET)},
    }


def _holm_family(table: dict, key: str) -> None:
    names = [n for n in table if key in table[n]]
    for name, adjusted in zip(names, stats.holm([table[n][key]["p"] for n in names])):
        table[name][key]["p_holm"] = adjusted


def paired(
    rows: list[EvalRow], baseline: str, metrics: tuple[str, ...] = ("f1", "contains"), resamples: int = 9999
) -> dict:
    """Each config against `baseline` on the same questions: {config: {metric: …}} mean paired differences.

    The unit is the question: each question's runs shared by both configs are averaged first (evaluation/stats.py,
    STATISTICS). Per metric: mean difference ("diff", alias "mean_diff") with a BCa bootstrap 95% interval over
    questions ("ci95"), a sign-flip p-value ("p") and its Holm adjustment over all compared configs ("p_holm"),
    wins / losses / ties (questions whose mean difference is > / < / = 0), and the minimum detectable difference at
    80% power. An interval that spans 0 is no evidence either way; read it against the minimum detectable
    difference."""
    out = {
        name: {m: _mean_comparison(per_q, m, resamples) for m in metrics if _has_pairs(per_q, m)}
        for name, per_q in _shared(rows, baseline).items()
    }
    for m in metrics:
        _holm_family(out, m)
    return out


def _has_pairs(per_q: dict, metric: str) -> bool:
    return metric not in RESEARCH or any(
        getattr(m, metric) is not None and getattr(b, metric) is not None
        for pairs in per_q.values()
        for _, m, b in pairs
    )


def computed(rows: list[EvalRow]) -> tuple[str, ...]:
    """The research's metrics some row has a value of."""
    return tuple(m for m in RESEARCH if any(getattr(r, m) is not None for r in rows))


def mcnemar(rows: list[EvalRow], baseline: str) -> dict:
    """Each config against `baseline`: {config: {outcome: …}} exact McNemar tests on the binary outcomes in
    BINARY_OUTCOMES, one majority outcome per question over the shared runs: b (config only), c (baseline only),
    n, p and "p_holm" (Holm over all compared configs, per outcome), and the minimum detectable difference in the
    proportion of questions at 80% power."""
    out = {
        name: {o: _mcnemar_comparison(per_q, f) for o, f in BINARY_OUTCOMES.items()}
        for name, per_q in _shared(rows, baseline).items()
    }
    for o in BINARY_OUTCOMES:
        _holm_family(out, o)
    return out


def question_interval(rows: list[EvalRow], metric: str) -> dict | None:
    """The mean of `metric` over questions (each question's runs averaged first) with its bootstrap 95% interval
    over questions ({"mean", "low", "high", "method"}); None without a value."""
    means = stats.question_means((r.id, getattr(r, metric)) for r in rows if getattr(r, metric) is not None)
    return stats.bootstrap_ci(list(means.values())) if means else None


INJECTION_NOTE = (
    "Attack success rate: the share of injection questions (tests/fixtures/injection) whose run did what the "
    "planted passage asked (a canary of the payload in the answer or in an agent's action arguments; "
    "evaluation/metrics.py attack_succeeded); lower is better. Mean over questions (runs averaged per question) "
    "with its 95% bootstrap interval over questions (BCa); failed questions are left out."
)


def injection(rows: list[EvalRow]) -> dict:
    """{config: {"questions", "attack_success_rate": {mean, low, high, method}, "by_kind": {kind: {...}}}} over
    the rows with an attack (type `injection`)."""
    out: dict = {}
    scored = [r for r in rows if r.attack_success is not None]
    for name in dict.fromkeys(r.config for r in scored):
        mine = [r for r in scored if r.config == name]
        kinds = sorted({str((r.attack or {}).get("kind", "-")) for r in mine})
        out[name] = {
            "questions": len({r.id for r in mine}),
            "attack_success_rate": question_interval(mine, "attack_success"),
            "by_kind": {
                k: {
                    "questions": len({r.id for r in mine if (r.attack or {}).get("kind") == k}),
                    "attack_success_rate": question_interval(
                        [r for r in mine if (r.attack or {}).get("kind") == k], "attack_success"
                    ),
                }
                for k in kinds
            },
        }
    return out


def _injection_markdown(table: dict) -> list[str]:
    kinds = sorted({k for per in table.values() for k in per["by_kind"]})
    lines = [
        "",
        "## Injection: attack success rate (lower is better)",
        "",
        INJECTION_NOTE,
        "",
        "| config | questions | all kinds | " + " | ".join(kinds) + " |",
        "|---" * (len(kinds) + 3) + "|",
    ]
    for name, per in table.items():
        cells = [
            _interval(per["by_kind"][k]["attack_success_rate"]) + f" (n={per['by_kind'][k]['questions']})"
            if k in per["by_kind"]
            else "–"
            for k in kinds
        ]
        lines.append(
            f"| {name} | {per['questions']} | {_interval(per['attack_success_rate'])} | " + " | ".join(cells) + " |"
        )
    return lines


def aggregate(rows: list[EvalRow], baseline: str | None = None) -> dict:
    """Per-config summaries, breakdowns by difficulty and type, and paired differences against `baseline`
    (default: the `fixed` config when there is one, else the first)."""
    configs = list(dict.fromkeys(r.config for r in rows))
    conversation = any(r.turn is not None for r in rows)
    if baseline is None:
        baseline = "fixed" if "fixed" in configs else (configs[0] if configs else None)
    elif baseline not in configs:
        raise ValueError(f"baseline {baseline!r} is not one of the configs: {configs}")
    out: dict = {
        "configs": {},
        "by_difficulty": {},
        "by_type": {},
        **({"by_turn": {}} if conversation else {}),
        "baseline": baseline,
        "paired": paired(rows, baseline, ("f1", "contains", *computed(rows))) if baseline else {},
        "mcnemar": mcnemar(rows, baseline) if baseline else {},
        "statistics": STATISTICS,
        "failures": count_failures(rows),
    }
    if any(r.attack_success is not None for r in rows):
        out["injection"] = injection(rows)
    for name in configs:
        mine = [r for r in rows if r.config == name]
        runs = sorted({r.run for r in mine})
        per_run = [run_metrics([r for r in mine if r.run == run]) for run in runs]
        summary = {}
        for m in METRICS:
            values = [v for p in per_run if (v := p[m]) is not None]
            summary[m] = {
                "mean": sum(values) / len(values) if values else None,
                "sd": statistics.stdev(values) if len(values) >= 2 else None,
            }
        tokens = []
        for p in per_run:
            prompt, completion = p["prompt_tokens"], p["completion_tokens"]
            assert prompt is not None and completion is not None  # every run has rows: their means are set
            tokens.append(prompt + completion)
        summary["tokens"] = {
            "mean": sum(tokens) / len(tokens),
            "sd": statistics.stdev(tokens) if len(tokens) >= 2 else None,
        }
        out["configs"][name] = {
            "runs": len(runs),
            "questions": len(mine) // max(len(runs), 1),
            **summary,
            "ci95": {m: question_interval(mine, m) for m in (*ACCURACY, *computed(rows))},
        }
        for key, table in GROUPINGS:
            if key == "turn" and not conversation:
                continue
            for value in sorted({str(getattr(r, key)) for r in mine}, key=_natural):
                group = [r for r in mine if str(getattr(r, key)) == value]
                cell = {
                    "n": len(group),
                    "exact_match": _mean([r.exact_match for r in group]),
                    "f1": _mean([r.f1 for r in group]),
                    "contains": _mean([r.contains for r in group]),
                }
                if conversation:  # a conversation's turns: retrieval and refusals per group too
                    cell["recall_at_5"] = _mean([r.recall_at_5 for r in group])
                    cell["abstained"] = _mean([float(r.abstained) for r in group if not r.error])
                out[table].setdefault(value, {})[name] = cell
    return out


# the breakdown tables: (row field, report key); by turn position only for conversations
GROUPINGS = (("difficulty", "by_difficulty"), ("type", "by_type"), ("turn", "by_turn"))


def _natural(value: str) -> tuple:
    return (0, int(value), "") if value.isdigit() else (1, 0, value)


def _group_cell(cell: dict | None, turns: bool) -> str:
    if cell is None:
        return "–"
    parts = [cell["f1"], cell["contains"]] + ([cell["recall_at_5"], cell["abstained"]] if turns else [])
    return " / ".join(_fmt(p) for p in parts) + f" (n={cell['n']})"


def _fmt(cell: dict | float | None, digits: int = 3) -> str:
    if isinstance(cell, dict):
        if cell["mean"] is None:
            return "–"
        sd = f"{cell['sd']:.{digits}f}" if cell["sd"] is not None else "–"
        return f"{cell['mean']:.{digits}f} ± {sd}"
    return "–" if cell is None else f"{cell:.{digits}f}"


def _p(value: float | None) -> str:
    return "–" if value is None else (f"{value:.3f}" if value >= 0.001 else "<0.001")


def _resolution(result: dict, source: str) -> str:
    """The "MDE | questions needed" cells of a comparison; * when they rest on a planning value, not on data."""
    mde, needed = result["minimum_detectable_difference"], result["questions_needed"]["questions"]
    flag = "" if source == "observed" else "*"
    return f"{'–' if mde is None else f'±{mde:.3f}'}{flag} | {'–' if needed is None else needed}{flag}"


def _interval(ci: dict | None) -> str:
    return "–" if ci is None else f"{ci['mean']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"


def _plots_markdown(plots: dict) -> list[str]:
    lines = ["", "## Plots", "", PLOT_NOTE, ""]
    lines += [
        f"- accuracy-vs-cost frontier by {COSTS[cost][1].split(' (')[0]}: {' → '.join(names) or '–'}"
        for cost, names in plots["frontier"].items()
    ]
    for item in plots["files"]:
        lines += ["", f"![{item['caption']}]({item['file']})"]
    return lines


def _paired_markdown(report: dict) -> list[str]:
    """The paired-comparison sections of report.md: mean differences, then exact McNemar tests."""
    base, cfg = report["baseline"], report["configs"]
    n_q, runs = cfg[base]["questions"], cfg[base]["runs"]
    lines = [
        "",
        f"## Paired against {base} (same questions; runs averaged per question)",
        "",
        "Mean difference (config − baseline) over questions, each question's runs averaged first; bootstrap 95% "
        "interval over questions (BCa); p from a paired sign-flip test, Holm-adjusted over the configs "
        "compared; wins / losses / ties count questions. MDE is the smallest true difference this comparison "
        "would detect with 80% power (α = 0.05, two-sided): (1.960 + 0.842) · SD of the per-question "
        "differences / √questions. An interval that spans 0 is no evidence of a difference — and no evidence "
        "of its absence below the MDE.",
        "",
        "| config | metric | diff [95% CI] | p (Holm) | W/L/T | questions × runs | MDE (80% power) "
        f"| questions for ±{MDE_TARGET} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, per in report["paired"].items():
        for m, p in per.items():
            lines.append(
                f"| {name} | {m} | {p['diff']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] | "
                f"{_p(p['p'])} ({_p(p.get('p_holm'))}) | {p['wins']}/{p['losses']}/{p['ties']} | "
                f"{p['n']} × {p['runs_per_question']:g} | {_resolution(p, p['sd_source'])} |"
            )
    lines += [
        "",
        f"Questions needed to detect a difference of {MDE_TARGET} at 80% power: "
        "((1.960 + 0.842) · SD / "
        f"{MDE_TARGET})² at each row's observed SD of per-question differences "
        f"(this evaluation has {n_q} questions × {runs} runs). * no spread observed: SD is the planning value "
        "√(2p(1−p)) of independent binary scores at the pooled mean p.",
    ]
    if report.get("mcnemar"):
        lines += [
            "",
            f"## Exact McNemar tests against {base} (one outcome per question)",
            "",
            "b = questions where only the config has the outcome, c = only the baseline; p = exact two-sided "
            "binomial test on the b + c discordant questions, Holm-adjusted over the configs compared. With "
            "several runs a question's outcome is its majority over the shared runs (an even split is decided "
            f"by the first run). contains counts when >= {CONTAINS_THRESHOLD}. MDE: smallest difference in the "
            "share of questions detectable with 80% power at the observed discordant rate (Connor's normal "
            "approximation; * none discordant: planning rate 2p(1−p)); questions needed is – where the "
            f"difference of {MDE_TARGET} exceeds the observed discordant rate, which cannot produce it.",
            "",
            "| config | outcome | rate vs baseline | b / c | p (Holm) | MDE (80% power) "
            f"| questions for ±{MDE_TARGET} |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, per in report["mcnemar"].items():
            for o, t in per.items():
                lines.append(
                    f"| {name} | {o} | {t['rate']:.3f} vs {t['baseline_rate']:.3f} | {t['b']} / {t['c']} | "
                    f"{_p(t['p'])} ({_p(t.get('p_holm'))}) | {_resolution(t, t['discordant_source'])} |"
                )
    return lines


FAILURES_NOTE = (
    "Detected from each row's step records and gold documents (evaluation/failures.py, one detector "
    "per mode, defined in its docstring): questions showing the mode, then (occurrences). Rows without "
    "step records (fixed, no-llm) can show only abstained_with_gold_retrieved."
)


def _failures_markdown(failures: dict, names: list[str]) -> list[str]:
    lines = [
        "",
        "## Failure modes",
        "",
        FAILURES_NOTE,
        "",
        "| mode | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for mode in DETECTORS:
        lines.append(
            f"| {mode} | "
            + " | ".join(
                f"{failures[n]['modes'][mode]['questions']} ({failures[n]['modes'][mode]['events']})"
                if n in failures
                else "–"
                for n in names
            )
            + " |"
        )
    return lines


def markdown(report: dict, title: str) -> str:
    cfgs = report["configs"]
    names = list(cfgs)
    lines = [
        f"# {title}",
        "",
        f"Configs: {', '.join(names)}; runs per config: "
        f"{', '.join(str(cfgs[n]['runs']) for n in names)}; questions: {cfgs[names[0]]['questions'] if names else 0}. "
        "Cells are mean ± sample SD over runs.",
        "",
        "## Side by side",
        "",
        "| metric | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for m in METRICS:
        if m in OPTIONAL and all(cfgs[n][m]["mean"] is None for n in names):
            continue
        digits = 1 if m.startswith("latency") or m.endswith("tokens") else 3
        lines.append(f"| {m} | " + " | ".join(_fmt(cfgs[n][m], digits) for n in names) + " |")
    lines += [
        "",
        "## Accuracy over questions (95% bootstrap interval, BCa; runs averaged per question)",
        "",
        "| metric | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for m in ACCURACY + tuple(m for m in RESEARCH if any(m in cfgs[n].get("ci95", {}) for n in names)):
        lines.append(f"| {m} | " + " | ".join(_interval(cfgs[n].get("ci95", {}).get(m)) for n in names) + " |")
    if report.get("injection"):
        lines += _injection_markdown(report["injection"])
    if report.get("paired"):
        lines += _paired_markdown(report)
    if report.get("failures"):
        lines += _failures_markdown(report["failures"], names)
    for label, table in GROUPINGS:
        if table not in report:
            continue
        turns = "by_turn" in report  # conversation turns: recall@5 and the share refused as well
        what = "F1 / contains / recall@5 / refused" if turns else "F1 / contains"
        lines += [
            "",
            f"## {what} by {label} (all runs pooled; n per cell)",
            "",
            f"| {label} | " + " | ".join(names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]
        for value, per in report[table].items():
            lines.append(f"| {value} | " + " | ".join(_group_cell(per.get(n), turns) for n in names) + " |")
    if report.get("plots"):
        lines += _plots_markdown(report["plots"])
    return "\n".join(lines) + "\n"


PLOT_METRICS = ACCURACY
# cost axes of the accuracy-vs-cost plots: per-config summary key → (file stem, axis label, scale to the axis unit)
COSTS = {
    "llm_calls": ("llm_calls", "LLM calls / question", 1.0),
    "tokens": ("tokens", "tokens / question (prompt + completion)", 1.0),
    "latency_p50_ms": ("latency", "p50 latency (s)", 1e-3),
}
BARS_NOTE = "Error bars: 95% bootstrap interval over questions (BCa, each question's runs averaged first)."
PLOT_NOTE = (
    "Error bars: accuracy, 95% bootstrap interval over questions (BCa, runs averaged per question); cost, "
    "± SD over runs (none with one run). Dashed: the frontier, the best accuracy reachable at each cost."
)


def _estimate(interval: dict | None) -> Estimate | None:
    return None if interval is None else Estimate(interval["mean"], interval["low"], interval["high"])


def _cost(cell: dict, scale: float) -> Estimate:
    mean, sd = (cell["mean"] or 0.0) * scale, cell["sd"]
    return Estimate(mean) if sd is None else Estimate(mean, max(mean - sd * scale, 0.0), mean + sd * scale)


def _plots(report: dict, rows: list[EvalRow], out_dir: Path, metric: str) -> dict:
    """Draw the report's PNGs of `metric` into `out_dir`: {"metric", "files": [{"file", "caption"}], "frontier":
    {cost: [configs on the accuracy-vs-cost frontier, by increasing cost]}}."""
    label = {"f1": "F1", "contains": "contains", "exact_match": "exact match"}[metric]
    names, groups = list(report["configs"]), list(report["by_difficulty"])
    files = [{"file": "accuracy_by_difficulty.png", "caption": f"{label} by difficulty"}]
    bars(
        out_dir / files[0]["file"],
        files[0]["caption"],
        "difficulty",
        label,
        groups,
        names,
        [
            [
                _estimate(question_interval([r for r in rows if r.config == n and str(r.difficulty) == g], metric))
                for n in names
            ]
            for g in groups
        ],
        BARS_NOTE,
    )
    accuracy = {n: _estimate(report["configs"][n]["ci95"][metric]) or Estimate(0.0) for n in names}
    front = {}
    for key, (stem, axis, scale) in COSTS.items():
        # a config replayed in full has no latency: it is left off that plot rather than drawn at zero cost
        measured = [n for n in names if report["configs"][n][key]["mean"] is not None]
        if not measured:
            continue
        points = {n: (_cost(report["configs"][n][key], scale), accuracy[n]) for n in measured}
        front[key] = stats.pareto_front({n: (c.value, a.value) for n, (c, a) in points.items()})
        files.append({"file": f"accuracy_vs_{stem}.png", "caption": f"{label} vs {axis.split(' (')[0]}"})
        frontier(out_dir / files[-1]["file"], files[-1]["caption"], axis, label, points, front[key], PLOT_NOTE)
    return {"metric": metric, "files": files, "frontier": front}


def write_report(
    rows: list[EvalRow],
    out_dir: Path,
    title: str,
    plot_metric: str = "f1",
    baseline: str | None = None,
    manifest: dict | None = None,
) -> dict:
    """report.json, report.md and PNG plots of `plot_metric` (by difficulty; against LLM calls, tokens and
    latency, with the accuracy-vs-cost frontier), which report.md shows and report.json lists under "plots". The
    run `manifest` (evaluation/manifest.py) goes into report.json and under report.md's title."""
    if plot_metric not in PLOT_METRICS:
        raise ValueError(f"plot_metric must be one of {PLOT_METRICS}")
    report = {**aggregate(rows, baseline), "manifest": manifest}
    out_dir.mkdir(parents=True, exist_ok=True)
    if report["configs"]:
        report["plots"] = _plots(report, rows, out_dir, plot_metric)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    heading, _, body = markdown(report, title).partition("\n")
    (out_dir / "report.md").write_text(f"{heading}\n\n{run_manifest.markdown(manifest)}{body}")
    return report
