"""Measuring: eval (QA comparisons of pipeline configs), eval-retrieval (BEIR benchmarks), fit-adapter."""

from __future__ import annotations

import json
import signal
import sys

from switchyard.commands.common import load_config, raise_terminated
from switchyard.errors import EXIT_FAIL, UsageError, program


def cmd_eval(args) -> int:
    from switchyard.evaluation.compare import run_evaluation

    signal.signal(signal.SIGTERM, raise_terminated)  # a killed evaluation still writes the vectors it recorded
    done = run_evaluation(
        args.dataset,
        args.configs,
        args.out,
        runs=args.runs,
        limit=args.limit,
        corpus=args.corpus,
        index_dir=args.index_dir,
        overrides=args.overrides,
        judge=args.judge,
        metrics=args.metrics,
        baseline=args.baseline,
        retry_errors=args.retry_errors,
        workers=args.workers,
        plot_metric=args.plot_metric,
        llm_cache=args.llm_cache,
        vector_cache=args.vector_cache,
        replay=args.replay,
        allow_mixed=args.allow_mixed,
        ray=args.ray,
        progress=False if args.no_progress else None,
        unreviewed=args.unreviewed,
    )
    if done.unasked_changes:
        print(
            f"note: nothing left to ask; the results in {done.out} were produced by a setup that differs from this "
            f"one ({'; '.join(done.unasked_changes[:6])}); the report describes them with their own manifest",
            file=sys.stderr,
        )
    for note in done.notes:
        print(f"note: {note}", file=sys.stderr)
    print(done.report_md.read_text())
    if done.asked:
        where = f"{done.ray_actors} Ray actor(s)" if done.ray_actors is not None else f"{done.workers} worker(s)"
        print(
            f"asked {done.asked} question(s) in {done.answering_s:.1f} s with {where} "
            f"({done.asked / done.answering_s:.2f} questions/s)"
        )
    if done.llm_cache_counts:
        counts = done.llm_cache_counts
        print(
            f"LLM replies: {counts['replayed']} replayed from and {counts['recorded']} recorded into "
            f"{args.llm_cache or 'llm.cache_dir'}"
        )
    if done.vector_cache_counts:
        counts = done.vector_cache_counts
        print(
            f"embedding vectors: {counts['replayed']} replayed from and {counts['recorded']} recorded into "
            f"{args.vector_cache or 'embedding.vector_cache'}"
        )
    print(
        f"wrote {done.report_md}, report.json, {done.results.name}, configs/ and "
        f"{len(done.report.get('plots', {}).get('files', []))} plots"
    )
    return 0 if done.report["configs"] else EXIT_FAIL


def cmd_eval_generate(args) -> int:
    from switchyard.evaluation.compare import llm_cache_overrides
    from switchyard.evaluation.generate import Settings, generate_question_set

    signal.signal(signal.SIGTERM, raise_terminated)  # what was tried is kept: a rerun resumes
    if args.replay and not args.llm_cache:
        raise UsageError("--replay needs --llm-cache DIR (the recorded replies)")
    args.overrides = [*args.overrides, *llm_cache_overrides(args.llm_cache, args.replay)]
    settings = Settings(
        size=args.size,
        max_tries=args.max_tries,
        seed=args.seed,
        two_hop=args.two_hop,
        min_chars=args.min_chars,
        max_copy=args.max_copy,
        max_similar=args.max_similar,
        answers=args.answers,
    )
    done = generate_question_set(
        load_config(args), args.out, settings, paths=args.paths, progress=False if args.no_progress else None
    )
    reasons = ", ".join(f"{n} {r}" for r, n in done.reasons.items() if r != "kept") or "none"
    print(
        f"kept {done.kept} of {done.tried} tried ({done.yield_rate:.0%}; {done.asked} asked now); rejected: {reasons}"
    )
    print(f"wrote {done.out}/questions.jsonl and generation.json; review it: {program()} eval review {done.out}")
    return 0 if done.kept else EXIT_FAIL


def cmd_eval_review(args) -> int:
    from pathlib import Path

    from switchyard.evaluation.review import review

    counts = review(Path(args.set))
    print(
        f"{counts['accept']} accepted, {counts['edit']} edited, {counts['reject']} rejected, "
        f"{counts['unreviewed']} not reviewed (in {args.set}/review.jsonl)"
    )
    return 0


def cmd_eval_retrieval(args) -> int:
    from switchyard.evaluation.retrieval import benchmark, format_benchmark

    config = load_config(args)
    result = benchmark(
        config,
        args.datasets,
        split=args.split,
        index_dir=args.index_dir,
        limit=args.limit,
        progress=None if not args.json else False,
        variants=_fusion_variants(args),
        out=args.out,
    )
    print(json.dumps(result) if args.json else format_benchmark(result))
    return 0


def _fusion_variants(args) -> dict:
    """`--fusion NAME=KEY=VALUE` (repeatable): each named variant's retrieve.fusion, on top of the config."""
    overrides: dict[str, list[str]] = {}
    for text in args.fusions:
        name, sep, setting = text.partition("=")
        if not sep or not name.strip() or "=" not in setting:
            raise UsageError(f"--fusion {text!r}: expected NAME=KEY=VALUE, e.g. z=normalization=zscore")
        if name.strip() in ("bm25", "dense", "hybrid", "hybrid+rerank"):
            raise UsageError(f"--fusion {text!r}: {name.strip()} is a built-in configuration; pick another name")
        overrides.setdefault(name.strip(), []).append(f"retrieve.fusion.{setting}")
    from switchyard.configs.loader import load_config as load

    return {name: load(args.config, list(args.overrides) + sets).retrieve.fusion for name, sets in overrides.items()}


def cmd_fit_adapter(args) -> int:
    from switchyard.evaluation.retrieval import fit_adapter

    meta = fit_adapter(
        load_config(args),
        args.dataset,
        args.out,
        split=args.split,
        index_dir=args.index_dir,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        negatives=args.negatives,
        progress=None if not args.json else False,
    )
    if args.json:
        print(json.dumps(meta))
    else:
        print(
            f"query adapter written to {args.out}: {meta['queries']} labelled queries of {meta['dataset']} "
            f"({meta['split']}), {meta['skipped_queries']} skipped (no relevant document indexed), "
            f"fitted in {meta['fit_s']} s\nuse it: --set retrieve.retrievers.dense.query_adapter={args.out}"
        )
    return 0
