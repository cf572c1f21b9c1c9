"""A comparison of pipeline configs on a QA dataset, end to end: what `switchyard eval` runs, callable from Python.

`run_evaluation` checks every setting before any work starts (each config, the judge's, the recorded replies and
vectors a replay needs), loads the dataset, asks what is not yet in the folder's results (evaluation/runner.py:
resume, workers, a Ray cluster, the reply cache), then reports on the rows of exactly this comparison — the
compared configs, the dataset's first `limit` questions, `runs` runs — in a fixed order (configs as given, run,
question), judged for faithfulness when a judge is given, with the research's metrics asked for
(evaluation/research_metrics.py), with the folder's manifest: report.json, report.md and the plots in `out`
(evaluation/report.py). Its messages name the settings as the command line's options do (`runs` is `--runs`, …).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from switchyard.configs.loader import load_config
from switchyard.errors import LLMCacheMiss, UsageError, VectorCacheMiss
from switchyard.evaluation.datasets import EvalQuestion, load_dataset
from switchyard.evaluation.rows import EvalRow, read_rows
from switchyard.evaluation.runner import Evaluator
from switchyard.extras import NO_RAY, import_with_extra, needs_extra


@dataclass
class Comparison:
    """What `run_evaluation` did: the report (report.json's content) and the run behind it."""

    out: Path  # the report folder: report.md, report.json, the results, configs/, plots
    results: Path  # the rows, one JSON line per (config, run, question)
    report: dict
    asked: int = 0  # questions asked now (0: every row was already there)
    answering_s: float = 0.0
    workers: int = 1
    ray_actors: int | None = None  # asked on a Ray cluster by this many actors (None: in this process)
    llm_cache_counts: dict[str, int] | None = None  # replies replayed and recorded (None: no reply cache)
    vector_cache_counts: dict[str, int] | None = None  # vectors replayed and recorded (None: no recording)
    unasked_changes: list[str] = field(default_factory=list)  # nothing asked, yet this setup differs from the folder's
    notes: list[str] = field(default_factory=list)  # what the report leaves out, and why (a metric not computed)

    @property
    def report_md(self) -> Path:
        return self.out / "report.md"


def run_evaluation(
    dataset: str | Path,
    configs: list[str | Path],
    out: str | Path = "eval-out",
    *,
    runs: int = 1,
    limit: int | None = None,
    corpus: str | Path | None = None,
    index_dir: str | Path | None = None,
    overrides: list[str] | None = None,
    judge: str | Path | None = None,
    metrics: list[str] | None = None,
    baseline: str | None = None,
    retry_errors: bool = False,
    workers: int = 1,
    plot_metric: str = "f1",
    llm_cache: str | Path | None = None,
    vector_cache: str | Path | None = None,
    replay: bool = False,
    allow_mixed: bool = False,
    ray: str | None = None,
    progress: bool | None = None,
    unreviewed: bool = False,
) -> Comparison:
    """Compare `configs` (pipeline YAML files or shipped names; each is named by its file stem) on `dataset`
    (a PhantomWiki folder, HotpotQA JSON/JSONL, or plain JSONL with `corpus`), `runs` times per question, into
    `out` (resumed if it holds results). `overrides` apply to every config; `index_dir` holds the collections
    (default: out/index); `judge`: also judge faithfulness with the LLM of this config's llm section; `metrics`:
    the research's metrics to add (evaluation/research_metrics.py: similarity, answer_relevance,
    context_relevance; the last two need `judge`); `baseline`: the config the others are paired against.
    `llm_cache` / `vector_cache` record LLM replies / embedding vectors there and answer from what was recorded
    before; with `replay`, only from them (no model). `ray`: ask on the
    Ray cluster at this address. `unreviewed`: a generated set's items not reviewed are scored too (accepted and
    edited ones always, rejected ones never). See `switchyard eval` (docs/cli.md) for each setting."""
    with needs_extra("eval", "switchyard eval (plots, paired statistics)"):
        from switchyard.evaluation.report import write_report
    if runs < 1 or workers < 1 or (limit is not None and limit < 1):
        raise UsageError("--runs, --workers and --limit must be >= 1")
    if replay and not (llm_cache or vector_cache):
        raise UsageError("--replay needs --llm-cache DIR (the recorded replies) or --vector-cache DIR")
    metrics = list(dict.fromkeys(metrics or []))
    _check_metrics(metrics, judge)
    ray_runner = import_with_extra("switchyard.evaluation.ray_runner", "ray", NO_RAY) if ray else None
    cache = llm_cache_overrides(llm_cache, replay)
    vectors = vector_cache_overrides(vector_cache, replay)
    overrides = [*(overrides or []), *cache, *vectors]
    for path in configs:
        load_config(path, [])  # every config is checked before any work starts
    judge_llm = load_config(judge, cache).llm if judge else None
    names = [Path(p).stem for p in configs]
    if baseline and baseline not in names:
        raise UsageError(f"--baseline {baseline} is not one of the compared configs")
    out = Path(out)
    # a corpus built from the dataset lives beside the index, so evaluations sharing index_dir share it too
    cache_dir = Path(index_dir).parent / "cache" if index_dir else out / "cache"
    questions = load_dataset(dataset, corpus, cache_dir=cache_dir, unreviewed=unreviewed)
    evaluator = Evaluator(
        questions,
        [Path(p) for p in configs],
        out,
        runs=runs,
        limit=limit,
        index_dir=Path(index_dir) if index_dir else None,
        overrides=overrides,
        allow_mixed=allow_mixed,
    )
    asker = ray_runner.RayAsker(ray) if ray_runner else None
    results = evaluator.run(progress=progress, retry_errors=retry_errors, workers=workers, asker=asker)
    rows = compared_rows(results, names, evaluator.questions, runs)
    title = f"{questions.name}: {', '.join(sorted(set(names)))}"
    manifest = evaluator.manifest
    if judge_llm is not None:
        from switchyard.evaluation.faithfulness import JUDGEMENTS, attach_judgements
        from switchyard.evaluation.manifest import with_judge

        faithfulness = evaluator.faithfulness_judge(judge_llm)
        rows = attach_judgements(rows, faithfulness.judge_results(rows, out / JUDGEMENTS))
        title += f"; faithfulness judge {faithfulness.name}"
        manifest = with_judge(manifest, judge_llm) if manifest else None
    notes: list[str] = []
    if metrics:
        rows, described = _research_metrics(rows, metrics, evaluator, overrides, judge_llm, out, notes)
        title += described
    report = write_report(rows, out, title, plot_metric=plot_metric, baseline=baseline, manifest=manifest)
    return Comparison(
        out=out,
        results=results,
        report=report,
        asked=evaluator.asked,
        answering_s=evaluator.answering_s,
        workers=workers,
        ray_actors=asker.size if asker else None,
        llm_cache_counts=asker.cache_counts if asker else evaluator.llm_cache_counts(),
        vector_cache_counts=asker.vector_counts if asker else evaluator.vector_cache_counts(),
        unasked_changes=evaluator.unasked_changes,
        notes=notes,
    )


def llm_cache_overrides(llm_cache: str | Path | None, replay: bool) -> list[str]:
    """The settings `--llm-cache DIR [--replay]` stand for (`llm.cache_dir`, `llm.replay`); with `replay`, DIR must
    be a folder of recorded replies."""
    if replay and llm_cache and not Path(llm_cache).is_dir():
        raise LLMCacheMiss(f"--llm-cache {llm_cache}: no such folder of recorded replies")
    return _recording_overrides("llm.cache_dir", "llm.replay", llm_cache, replay)


def vector_cache_overrides(vector_cache: str | Path | None, replay: bool) -> list[str]:
    """The settings `--vector-cache DIR [--replay]` stand for (`embedding.vector_cache`, `embedding.replay`); with
    `replay`, DIR must be a folder of recorded vectors."""
    if replay and vector_cache and not Path(vector_cache).is_dir():
        raise VectorCacheMiss(f"--vector-cache {vector_cache}: no such folder of recorded vectors")
    return _recording_overrides("embedding.vector_cache", "embedding.replay", vector_cache, replay)


def _recording_overrides(folder_key: str, replay_key: str, folder: str | Path | None, replay: bool) -> list[str]:
    return [f"{folder_key}={folder}"] + ([f"{replay_key}=true"] if replay else []) if folder else []


def _check_metrics(metrics: list[str], judge) -> None:
    from switchyard.evaluation.research_metrics import CHOICES, JUDGED

    unknown = [m for m in metrics if m not in CHOICES]
    if unknown:
        raise UsageError(f"--metrics {' '.join(unknown)}: unknown; choose from {', '.join(CHOICES)}")
    judged = [m for m in metrics if m in JUDGED]
    if judged and not judge:
        raise UsageError(f"--metrics {' '.join(judged)} needs --judge FILE (the LLM that judges it)")


def _research_metrics(rows, metrics, evaluator, overrides, judge_llm, out: Path, notes: list[str]):
    """`rows` with the research's metrics in `metrics` filled in, and the words the report's title gets. The
    embedder is the default config's `embedding:` section under the evaluation's overrides (so it records into and
    replays from `--vector-cache`); a replay missing a vector leaves the metrics out with a note."""
    from switchyard.evaluation import research_metrics as rm
    from switchyard.evaluation.faithfulness import judge_name
    from switchyard.evaluation.runner import flush_vector_recordings

    embedding = load_config(None, overrides).embedding
    embedder = evaluator.models.embedder(embedding)
    described = f"; similarity by {embedding.model}" if "similarity" in metrics else ""
    try:
        if "similarity" in metrics:
            rows = rm.with_similarity(rows, embedder.run)
        judged = [m for m in metrics if m in rm.JUDGED]
        if judged:
            judge = rm.RelevanceJudge(evaluator.models.llm(judge_llm), judge_name(judge_llm), embedder.run)
            for metric in judged:
                rows = rm.attach(rows, metric, judge.judge_results(rows, metric, out))
            described += f"; {', '.join(judged)} judged by {judge.name}"
    except VectorCacheMiss as exc:
        notes.append(f"--metrics {' '.join(metrics)}: some not computed, a vector is not recorded: {exc}")
    finally:
        flush_vector_recordings(evaluator.models)
    return rows, described


def compared_rows(results: Path, names: list[str], questions: list[EvalQuestion], runs: int) -> list[EvalRow]:
    """The rows of `results` that belong to one comparison (configs `names`, `questions`, runs 0..`runs`-1),
    rescored, in report order: configs as named, then run, then question (the file's order depends on which worker
    finished first; reports do not)."""
    config_order = {name: i for i, name in enumerate(names)}
    question_order = {q.id: i for i, q in enumerate(questions)}
    rows = [
        r.rescored() for r in read_rows(results) if r.config in config_order and r.id in question_order and r.run < runs
    ]
    return sorted(rows, key=lambda r: (config_order[r.config], r.run, question_order[r.id]))
