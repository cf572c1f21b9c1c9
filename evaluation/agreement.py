"""Does a generated question set rank pipeline configs as a labelled set does? (issue 63, goal 4)

Given two evaluation reports (report.json) of the same configs, one on a labelled set and one on a set generated
from the same corpus (`switchyard eval generate`), `rank_agreement` gives each config's mean on both, Kendall's tau-b
between the two orders (scipy.stats.kendalltau; ties count as ties) with its p-value, and each config's paired
difference against the baseline on both sets side by side (mean difference, 95% BCa interval, Holm-adjusted p, as
report.json holds them). Tau near 1: the generated set orders the configs as the labelled one does; near 0: its
order says nothing about theirs. With a handful of configs tau is coarse (5 configs: 10 pairs, one swap moves it by
0.2) and its p-value large; the paired differences say which swaps are within noise.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Agreement:
    metric: str
    configs: list[str]
    labelled: dict[str, float]
    generated: dict[str, float]
    tau: float | None
    p: float | None
    paired: dict[str, dict]  # config -> {"labelled": pair, "generated": pair} against each report's baseline


def config_means(report: dict, metric: str) -> dict[str, float]:
    out = {}
    for name, figures in report["configs"].items():
        value = (figures.get(metric) or {}).get("mean")
        if value is not None:
            out[name] = float(value)
    return out


def rank_agreement(labelled: dict, generated: dict, metric: str = "contains") -> Agreement:
    """`labelled`, `generated`: report.json contents. Configs compared: those both reports score on `metric`."""
    from scipy.stats import kendalltau

    a, b = config_means(labelled, metric), config_means(generated, metric)
    configs = [name for name in a if name in b]
    tau = p = None
    if len(configs) >= 2:
        result = kendalltau([a[c] for c in configs], [b[c] for c in configs])
        if result.statistic == result.statistic:  # NaN when one side is constant
            tau, p = float(result.statistic), float(result.pvalue)
    paired = {}
    for name in configs:
        pairs = {
            side: (report.get("paired", {}).get(name) or {}).get(metric)
            for side, report in (("labelled", labelled), ("generated", generated))
        }
        if any(pairs.values()):
            paired[name] = pairs
    return Agreement(metric, configs, {c: a[c] for c in configs}, {c: b[c] for c in configs}, tau, p, paired)


def _pair(pair: dict | None) -> str:
    if not pair:
        return "–"
    low, high = pair.get("ci95") or (None, None)
    interval = f" [{low:+.3f}, {high:+.3f}]" if low is not None and high is not None else ""
    p = pair.get("p_holm", pair.get("p"))
    diff = pair.get("mean_diff", pair.get("diff"))  # reports written before mean_diff hold it as diff
    return f"{diff:+.3f}{interval}" + (f" p={p:.2f}" if p is not None else "")


def agreement_markdown(agreement: Agreement, baseline: str) -> str:
    m = agreement.metric
    lines = [
        f"| config | {m}, labelled | {m}, generated | vs {baseline}, labelled | vs {baseline}, generated |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(agreement.configs, key=lambda c: -agreement.labelled[c]):
        pairs = agreement.paired.get(name, {})
        lines.append(
            f"| {name} | {agreement.labelled[name]:.3f} | {agreement.generated[name]:.3f} | "
            f"{_pair(pairs.get('labelled'))} | {_pair(pairs.get('generated'))} |"
        )
    tau = "undefined (one set scores every config the same)" if agreement.tau is None else f"{agreement.tau:+.2f}"
    p = "" if agreement.p is None else f" (p = {agreement.p:.2f})"
    lines.append(f"\nKendall's tau-b of the two orders over {len(agreement.configs)} configs: {tau}{p}")
    return "\n".join(lines)
