"""Aggregate per-question results into tables (report.md), numbers (report.json) and plots (PNG).

Per config, each metric is averaged within a run, then reported as mean ± sample SD over the runs (SD needs >= 2
runs; with one run it is shown as "±–"). Breakdowns by difficulty and type pool all runs.
"""
from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from retrievers.metrics import percentile

METRICS = ["exact_match", "f1", "contains", "gold_recall", "citation_precision", "faithfulness", "abstention_rate",
           "correct_abstention_rate", "latency_p50_ms", "latency_p95_ms", "llm_calls", "prompt_tokens",
           "completion_tokens", "parse_fallbacks", "guard_activations", "errors", "timeouts", "judge_fallbacks"]
OPTIONAL = {"faithfulness", "judge_fallbacks"}  # only when an LLM judge ran (cli.py eval --judge)


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def run_metrics(rows: list[dict]) -> dict[str, float | None]:
    abstained = [r for r in rows if r["abstained"]]
    lat = [r["latency_ms"] for r in rows]
    return {
        "exact_match": _mean([r["exact_match"] for r in rows]),
        "f1": _mean([r["f1"] for r in rows]),
        "contains": _mean([r["contains"] for r in rows]),
        "gold_recall": _mean([r.get("gold_recall") for r in rows]),
        "citation_precision": _mean([r.get("citation_precision") for r in rows]),
        "faithfulness": _mean([r.get("faithfulness") for r in rows]),
        "abstention_rate": len(abstained) / len(rows),
        # an abstention is "correct" when the run searched and nothing it retrieved was gold (nothing to answer
        # from); giving up without searching is not, however unanswerable the question then looked
        "correct_abstention_rate": _mean([float(r["gold_recall"] == 0 and bool(r.get("retrieved_doc_ids")))
                                          for r in abstained if r.get("gold_recall") is not None]),
        "latency_p50_ms": percentile(lat, 50),
        "latency_p95_ms": percentile(lat, 95),
        "llm_calls": _mean([r["llm_calls"] for r in rows]),
        "prompt_tokens": _mean([r["prompt_tokens"] for r in rows]),
        "completion_tokens": _mean([r["completion_tokens"] for r in rows]),
        "parse_fallbacks": _mean([r["parse_fallbacks"] for r in rows]),
        "guard_activations": _mean([sum(r["guards"].values()) for r in rows]),
        "errors": sum(1 for r in rows if r.get("error")),
        "timeouts": sum(1 for r in rows if "timed out" in (r.get("error") or "")),  # LLM calls past llm.timeout_s
        "judge_fallbacks": _mean([r.get("judge_fallbacks") for r in rows]),
    }


def paired(rows: list[dict], baseline: str, metrics: tuple[str, ...] = ("f1", "contains"),
           resamples: int = 2000) -> dict:
    """Each config against `baseline` on the same (run, question) pairs: mean difference with a seeded bootstrap
    95% interval, and how many questions it won, lost and tied. An interval that spans 0 is no evidence either way."""
    base = {(r["run"], r["id"]): r for r in rows if r["config"] == baseline}
    out: dict = {}
    for name in dict.fromkeys(r["config"] for r in rows):
        if name == baseline:
            continue
        mine = {(r["run"], r["id"]): r for r in rows if r["config"] == name}
        keys = sorted(set(mine) & set(base))
        if not keys:
            continue
        out[name] = {}
        for m in metrics:
            diffs = [mine[k][m] - base[k][m] for k in keys]
            rng = random.Random(0)
            means = sorted(sum(rng.choices(diffs, k=len(diffs))) / len(diffs) for _ in range(resamples))
            out[name][m] = {"diff": sum(diffs) / len(diffs), "ci95": [means[int(0.025 * resamples)],
                                                                       means[int(0.975 * resamples) - 1]],
                            "wins": sum(d > 0 for d in diffs), "losses": sum(d < 0 for d in diffs),
                            "ties": sum(d == 0 for d in diffs), "n": len(diffs)}
    return out


def aggregate(rows: list[dict], baseline: str | None = None) -> dict:
    """Per-config summaries, breakdowns by difficulty and type, and paired differences against `baseline`
    (default: the `fixed` config when there is one, else the first)."""
    configs = list(dict.fromkeys(r["config"] for r in rows))
    if baseline is None:
        baseline = "fixed" if "fixed" in configs else (configs[0] if configs else None)
    elif baseline not in configs:
        raise ValueError(f"baseline {baseline!r} is not one of the configs: {configs}")
    out: dict = {"configs": {}, "by_difficulty": {}, "by_type": {}, "baseline": baseline,
                 "paired": paired(rows, baseline) if baseline else {}}
    for name in configs:
        mine = [r for r in rows if r["config"] == name]
        runs = sorted({r["run"] for r in mine})
        per_run = [run_metrics([r for r in mine if r["run"] == run]) for run in runs]
        summary = {}
        for m in METRICS:
            values = [p[m] for p in per_run if p[m] is not None]
            summary[m] = {"mean": sum(values) / len(values) if values else None,
                          "sd": statistics.stdev(values) if len(values) >= 2 else None}
        out["configs"][name] = {"runs": len(runs), "questions": len(mine) // max(len(runs), 1), **summary}
        for key, table in (("difficulty", "by_difficulty"), ("type", "by_type")):
            for value in sorted({str(r[key]) for r in mine}):
                group = [r for r in mine if str(r[key]) == value]
                out[table].setdefault(value, {})[name] = {
                    "n": len(group), "exact_match": _mean([r["exact_match"] for r in group]),
                    "f1": _mean([r["f1"] for r in group]), "contains": _mean([r["contains"] for r in group])}
    return out


def _fmt(cell: dict | float | None, digits: int = 3) -> str:
    if isinstance(cell, dict):
        if cell["mean"] is None:
            return "–"
        sd = f"{cell['sd']:.{digits}f}" if cell["sd"] is not None else "–"
        return f"{cell['mean']:.{digits}f} ± {sd}"
    return "–" if cell is None else f"{cell:.{digits}f}"


def markdown(report: dict, title: str) -> str:
    cfgs = report["configs"]
    names = list(cfgs)
    lines = [f"# {title}", "", f"Configs: {', '.join(names)}; runs per config: "
             f"{', '.join(str(cfgs[n]['runs']) for n in names)}; questions: {cfgs[names[0]]['questions']}. "
             "Cells are mean ± sample SD over runs.", "", "## Side by side", "",
             "| metric | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for m in METRICS:
        if m in OPTIONAL and all(cfgs[n][m]["mean"] is None for n in names):
            continue
        digits = 1 if m.startswith("latency") or m.endswith("tokens") else 3
        lines.append(f"| {m} | " + " | ".join(_fmt(cfgs[n][m], digits) for n in names) + " |")
    if report.get("paired"):
        lines += ["", f"## Paired against {report['baseline']} (same questions and runs)", "",
                  "Mean difference with a bootstrap 95% interval; wins / losses / ties count questions. An interval "
                  "that spans 0 is no evidence of a difference.", "",
                  "| config | F1 diff [95% CI] | F1 W/L/T | contains diff [95% CI] | contains W/L/T |",
                  "|---|---|---|---|---|"]
        for name, per in report["paired"].items():
            cells = []
            for m in ("f1", "contains"):
                p = per[m]
                cells += [f"{p['diff']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]",
                          f"{p['wins']}/{p['losses']}/{p['ties']}"]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for table, label in (("by_difficulty", "difficulty"), ("by_type", "type")):
        lines += ["", f"## F1 / contains by {label} (all runs pooled; n per cell)", "",
                  f"| {label} | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for value, per in report[table].items():
            lines.append(f"| {value} | " + " | ".join(
                f"{_fmt(per[n]['f1'])} / {_fmt(per[n]['contains'])} (n={per[n]['n']})" if n in per else "–"
                for n in names) + " |")
    return "\n".join(lines) + "\n"


PLOT_METRICS = ("f1", "contains", "exact_match")


def write_report(rows: list[dict], out_dir: Path, title: str, plot_metric: str = "f1",
                 baseline: str | None = None) -> dict:
    """report.json, report.md and three PNG plots of `plot_metric` (by difficulty; against LLM calls; against
    latency)."""
    from evaluation.plots import bars, scatter

    if plot_metric not in PLOT_METRICS:
        raise ValueError(f"plot_metric must be one of {PLOT_METRICS}")
    label = {"f1": "F1", "contains": "contains", "exact_match": "exact match"}[plot_metric]
    report = aggregate(rows, baseline)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    (out_dir / "report.md").write_text(markdown(report, title))
    names = list(report["configs"])
    groups = list(report["by_difficulty"])
    bars(out_dir / "accuracy_by_difficulty.png", f"{label} by difficulty", groups, names,
         [[(report["by_difficulty"][g].get(n) or {}).get(plot_metric) or 0.0 for n in names] for g in groups])
    points = [(n, report["configs"][n]["llm_calls"]["mean"] or 0.0,
               report["configs"][n][plot_metric]["mean"] or 0.0) for n in names]
    scatter(out_dir / "accuracy_vs_llm_calls.png", f"{label} vs LLM calls per question", "LLM calls / question",
            points)
    points = [(n, (report["configs"][n]["latency_p50_ms"]["mean"] or 0.0) / 1e3,
               report["configs"][n][plot_metric]["mean"] or 0.0) for n in names]
    scatter(out_dir / "accuracy_vs_latency.png", f"{label} vs latency", "p50 latency (s)", points)
    return report
