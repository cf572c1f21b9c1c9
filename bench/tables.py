"""The docs tables generated from result files (bench/results.py): one function per table, result -> Markdown."""

from __future__ import annotations

import textwrap


def footprint(result: dict) -> str:
    """library_footprint: each install's venv size and install time."""
    rows = ["| install (fresh venv, from the wheelhouse) | venv MB | install s |", "|---|---|---|"]
    rows += [f"| `{n}` | {f['venv_mb']:,.0f} | {f['install_seconds']:.0f} |" for n, f in result["figures"].items()]
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def imports(result: dict) -> str:
    """import_cost: wall time and peak RSS of importing the package and the pipeline in a fresh interpreter."""
    rows = ["| import (fresh interpreter, median) | s | peak RSS MB |", "|---|---|---|"]
    rows += [f"| `{n}` | {f['seconds']:.2f} | {f['rss_mb']:.0f} |" for n, f in result["figures"].items()]
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def ask_overhead(result: dict) -> str:
    """ask_latency: per-node p50/p95, then the per-question total, LLM time and the pipeline's overhead."""
    figures = result["figures"]
    rows = ["| node | calls | p50 ms | p95 ms |", "|---|---|---|---|"]
    rows += [f"| {n} | {f['calls']} | {f['p50_ms']:.1f} | {f['p95_ms']:.1f} |" for n, f in figures["nodes"].items()]
    rows += ["", "| per question | p50 ms | p95 ms |", "|---|---|---|"]
    rows += [f"| {label} | {figures[key]['p50_ms']:.0f} | {figures[key]['p95_ms']:.0f} |" for key, label in _TOTALS]
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def shares(result: dict) -> str:
    """retrieval_shares_<split> (fusion_tuning.py shares): per set, the share of queries each single list gets right
    at rank 1, and the shares only BM25 or only dense (windows) gets right."""
    head = "| dataset | queries | bm25 | dense (windows) | dense (chunk vectors) | only bm25 | only dense |"
    rows = [head, "|---|---|---|---|---|---|---|"]
    for name, f in result["figures"]["datasets"].items():
        cells = [f["queries"], *(f"{f[k]:.3f}" for k in ("bm25", "dense", "chunk", "only_bm25", "only_dense"))]
        rows.append(f"| {name} | " + " | ".join(map(str, cells)) + " |")
    return "\n".join(rows) + (f"\n\n{_provenance(result)}" if "commit" in result else "")


def retrieval_chosen(result: dict) -> str:
    """fusion_tuning.py test --out: per dataset and metric, the single lists (the best in bold) and each chosen
    configuration with its difference to the best single list and the paired sign-flip p."""
    chosen = list(result["config"]["chosen"])
    first = next(iter(next(iter(result["figures"]["datasets"].values())).values()))
    lists = [r for r in _SINGLE_LABELS if r in first]
    head = ["split (queries)", "metric", *(_SINGLE_LABELS[r] for r in lists), *chosen]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, metrics in result["figures"]["datasets"].items():
        for metric, f in metrics.items():
            best = max(lists, key=lambda r: f[r])
            singles = [f"**{f[r]:.4f}**" if r == best else f"{f[r]:.4f}" for r in lists]
            picks = [f"{f[c]['value']:.4f} ({f[c]['diff']:+.4f}, p {f[c]['p']:.3f})" for c in chosen]
            label = "nDCG@10" if metric == "ndcg@10" else "R@1" if metric == "recall@1" else metric
            rows.append(f"| {name} ({f['queries']}) | {label} | " + " | ".join(singles + picks) + " |")
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def eval_workers(result: dict) -> str:
    """eval_workers: per worker count, the command's wall time and the answering time, throughput and speed-ups
    over the first (sequential) run."""
    f = result["figures"]
    runs = f["workers"]
    base = next(iter(runs.values()))
    head = "| workers | command wall s | answering s | questions/s | speed-up (answering) | speed-up (wall) | errors |"
    rows = [head, "|---|---|---|---|---|---|---|"]
    for n, r in runs.items():
        rows.append(
            f"| {n} | {r['wall_s']:.1f} | {r['answering_s']:.1f} | {r['rows'] / r['answering_s']:.2f} | "
            f"{base['answering_s'] / r['answering_s']:.2f} | {base['wall_s'] / r['wall_s']:.2f} | {r['errors']} |"
        )
    load = " / ".join(f"{x:.1f}" for x in f["load_average"])
    same = "the same" if f["identical_to_sequential"] else "**not** the same"
    note = f"Rows (id, prediction, abstained, LLM calls) {same} for every worker count; load average at the end {load}."
    return "\n".join(rows) + f"\n\n{note}\n\n{_provenance(result)}"


def ray_ingest(result: dict) -> str:
    """ray_ingest: per setup (local, Ray with 1 and 2 actors), the best round's chunks/s against local, wall time
    and peak memory."""
    f = result["figures"]
    local = f["setups"]["local"]["chunks_per_s"]
    labels = {"local": "local", "ray-1": f"Ray, 1 actor of {f['cpus']} CPUs", "ray-2": "Ray, 2 actors"}
    rows = [
        "| setup | chunks/s (rounds) | vs local | wall s | driver peak MB | actor peak MB |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in f["setups"].items():
        rounds = " / ".join(f"{x:.1f}" for x in r["rounds_chunks_per_s"])
        actor = f"{r['actor_peak_mb']:.0f}" if r["actors_seen"] else "-"
        rows.append(
            f"| {labels.get(name, name)} | **{r['chunks_per_s']:.1f}** ({rounds}) | {r['chunks_per_s'] / local:.2f}× | "
            f"{r['wall_s']:.1f} | {r['driver_peak_mb']:.0f} | {actor} |"
        )
    note = f"{f['docs']} SciFact abstracts in {f['files']} files, {f['chunks']} chunks. {_load_average(f)}"
    return "\n".join(rows) + f"\n\n{note}\n\n{_provenance(result)}"


def rerank_latency(result: dict) -> str:
    """rerank_latency: per N candidates, p50 / p95 / mean ms per query; load time and memory below."""
    f = result["figures"]
    rows = ["| N candidates | p50 ms | p95 ms | mean ms |", "|---|---|---|---|"]
    rows += [f"| {n} | {r['p50']:,.0f} | {r['p95']:,.0f} | {r['mean']:,.0f} |" for n, r in f["latency_ms"].items()]
    memory = (
        f"Load {f['load_s']:.2f} s; RSS {f['rss_mb_before_load']:.0f} MB before loading, "
        f"{f['rss_mb_after_load']:.0f} MB after, peak {f['peak_rss_mb']:.0f} MB after the runs."
    )
    return "\n".join(rows) + f"\n\n{memory}\n\n{_provenance(result)}"


def ingest_throughput(result: dict) -> str:
    """ingest_throughput: per embedding backend, full-ingest and embed-only chunks/s against torch; then, when the
    run scored SciFact, each backend's vectors against torch's and its nDCG@10."""
    f = result["figures"]
    backends = f["backends"]
    torch = backends["torch"]
    rows = [
        "| backend | precision | load s | ingest chunks/s (rounds) | embed-only chunks/s | overhead | vs torch |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, b in backends.items():
        rounds = " / ".join(f"{x:.1f}" for x in b["ingest"])
        rows.append(
            f"| {name} | {b['precision']} | {b['load_s']:.1f} | **{b['ingest_best']:.1f}** ({rounds}) | "
            f"{b['embed_best']:.1f} | {100 * (1 - b['ingest_best'] / b['embed_best']):.0f}% | "
            f"{b['ingest_best'] / torch['ingest_best']:.2f}× |"
        )
    scored = {name: b for name, b in backends.items() if b["ndcg@10"]}
    if scored:
        rows += ["", "| backend | min cos to torch | SciFact test nDCG@10 dense | hybrid |", "|---|---|---|---|"]
        rows += [
            f"| {name} | {b['cos_min']:.6f} | {b['ndcg@10']['dense']:.4f} | {b['ndcg@10']['hybrid']:.4f} |"
            for name, b in scored.items()
        ]
    bar = f["bar"]
    verdict = (
        f"The bar (≥ {bar['speedup']:g}× torch's ingest chunks/s, nDCG@10 within {bar['ndcg_tolerance']} of torch's): "
        f"met by {', '.join(bar['met_by']) or 'no backend'}."
        if scored
        else "No nDCG@10 in this run, so the bar was not checked."
    )
    note = (
        f"{f['docs']:,} SciFact abstracts, {torch['chunks']:,} chunks, {f['threads']} threads, best of "
        f"{f['rounds']} rounds; settings {', '.join(f['overrides']) or 'the defaults'}. {_load_average(f)} {verdict}"
    )
    return "\n".join(rows) + "\n\n" + _wrapped(note) + f"\n\n{_provenance(result)}"


def scale_build(result: dict) -> str:
    """scale: per collection size, build, compaction, index times and disk."""
    rows = [
        "| chunks | searched vectors | build s (writes) | compaction s | FTS index s | vector index s | disk MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for size, r in result["figures"]["sizes"].items():
        rows.append(
            f"| {int(size):,} | {r['searched_vectors']:,} | {r['build_s']:.0f} ({r['write_s']:.0f}) | "
            f"{r['compact_s']:.0f} | {r['fts_s']:.0f} | {r['vector_index_s']:.0f} | {r['disk_mb']:,.0f} |"
        )
    return "\n".join(rows)


def scale_search(result: dict) -> str:
    """scale: per collection size, the search process's memory and the default hybrid search's latency."""
    f = result["figures"]
    parts = ("bm25", "dense", "e5", "embed") if f["e5"] else ("bm25", "dense", "embed")
    rows = [
        f"| chunks | search process peak RSS MB | hybrid p50 / p95 ms | {' / '.join(parts)} p50 ms "
        "| the rank_bm25 backend instead |",
        "|---|---|---|---|---|",
    ]
    for size, r in f["sizes"].items():
        s, b = r["search"], r["rank_bm25"]
        latencies = " / ".join(f"{s[part + '_p50_ms']:.1f}" for part in parts)
        rank_bm25 = b.get("refused") or (
            f"{b['held_mb']:,.0f} MB ({b['mb_per_1k_chunks']:.1f} per 1k chunks), built in {b['build_s']:.0f} s, "
            f"query p50 {b['p50_ms']:,.0f} ms"
        )
        rows.append(
            f"| {int(size):,} | {s['peak_rss_mb']:,.0f} | **{s['p50_ms']:.1f} / {s['p95_ms']:.1f}** | "
            f"{latencies} | {rank_bm25} |"
        )
    note = (
        f"Seed: {f['seed_chunks']:,} real chunks"
        + (
            f"; {f['windows_per_chunk']:g} synthetic window vectors per chunk on average"
            if f["windows_per_chunk"]
            else ""
        )
        + f". {_load_average(f)}"
    )
    return "\n".join(rows) + "\n\n" + _wrapped(note) + f"\n\n{_provenance(result)}"


def scale_indexes(result: dict) -> str:
    """scale: per size, each vector index and search setting: build time, recall against exact search, latency."""
    k = result["figures"]["k"]
    rows = [
        f"| chunks | vector index | search settings | build s | recall@10 | recall@{k} | dense p50 / p95 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for size, r in result["figures"]["sizes"].items():
        rows += [
            f"| {int(size):,} | {v['index']} | {v['settings']} | {v['build_s']:.0f} | {v['recall@10']:.3f} | "
            f"{v[f'recall@{k}']:.3f} | {v['p50_ms']:.1f} / {v['p95_ms']:.1f} |"
            for v in r["vector_indexes"]
        ]
    return "\n".join(rows)


def cross_encoder_test(result: dict) -> str:
    """tune_reranker report --result: per metric and dataset, the single lists, the fused default and the reranked
    default, with the paired p-values against the fused default and the best single list."""
    f = result["figures"]
    rows = [
        "| split (queries) | bm25 | dense | fused (the default) | **+ cross-encoder** | Δ vs fused (p) "
        "| Δ vs best single (p) |",
        "|---|---|---|---|---|---|---|",
    ]
    for metric, label in (("ndcg@10", "nDCG@10"), ("recall@1", "R@1")):
        rows.append(f"| {label} | | | | | | |")
        for name, d in f["datasets"].items():
            m = d[metric]
            single = m["best_single"]
            rows.append(
                f"| {name} ({d['queries']}) | {m['bm25']:.4f} | {m['dense']:.4f} | {m['hybrid']:.4f} | "
                f"**{m['reranked']:.4f}** | {m['reranked'] - m['hybrid']:+.4f} ({_p(m['p_vs_fused'])}) | "
                f"{m['reranked'] - m[single]:+.4f} vs {single} ({_p(m['p_vs_single'])}) |"
            )
        names = [n for n in f["datasets"] if n != "nq-toy"]
        lists = ("bm25", "dense", "hybrid", "reranked")
        macro = {k: sum(f["datasets"][n][metric][k] for n in names) / len(names) for k in lists}
        rows.append(
            f"| macro, {len(names)} sets (not nq-toy) | {macro['bm25']:.4f} | {macro['dense']:.4f} | "
            f"{macro['hybrid']:.4f} | **{macro['reranked']:.4f}** | {macro['reranked'] - macro['hybrid']:+.4f} | |"
        )
    note = f"The first {f['n']} fused passages reranked, `rerank.fused_weight` {f['fused_weight']}."
    return "\n".join(rows) + "\n\n" + note + f"\n\n{_provenance(result)}"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def calibration_refusals(result: dict) -> str:
    """calibration_refusals (bench/calibration/06_refusals.py): per set the quantiles of the best cosine and the best
    word coverage among the top 5, then the share graded `incorrect` per rule (cosine < t and coverage < c), the
    shipped rule in bold."""
    f = result["figures"]
    qs = "/".join(f"{q * 100:g}" for q in f["quantiles"]) + "%"
    rows = [f"| set | n | best cosine {qs} | best coverage {qs} |", "|---|---|---|---|"]
    for name, s in f["sets"].items():
        cells = [" ".join(f"{x:.2f}" for x in s[k]) for k in ("cosine", "coverage")]
        rows.append(f"| {_calibration_set(name)} | {s['n']} | " + " | ".join(cells) + " |")
    sets = list(f["sets"])
    rule = lambda r: (round(r["t"], 2), round(r["c"], 2))
    shown = {rule(r): r for r in f["sweep"] if round(r["c"], 2) in (0.5, 0.6, 1.01)}
    shown |= {rule(f[k]): f[k] for k in ("before", "shipped")}
    head = [_calibration_set(name) + (" (higher is better)" if "near miss" in name else "") for name in sets]
    rows += ["", "| rule | " + " | ".join(head) + " |", "|---|" + "---|" * len(sets)]
    for key in sorted(shown):
        r = shown[key]
        label = f"cosine < {r['t']:.2f}" + (" (cosine only)" if r["c"] > 1 else f" and coverage < {r['c']:g}")
        cells = [f"{r['rates'][name]:.1%}" for name in sets]
        if key == rule(f["shipped"]):
            label, cells = f"**now: {label}**", [f"**{c}**" for c in cells]
        elif key == rule(f["before"]):
            label = f"before: {label}"
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    note = (
        "Share graded `incorrect` (refused after the retry): `incorrect` when the best cosine < t and the best "
        "coverage < c; c = 1.01 is the cosine-only rule. Now: the default config's `grade.thresholds` (`incorrect`, "
        "`coverage`); before: the calibration's `incorrect` alone."
    )
    return "\n".join(rows) + "\n\n" + _wrapped(note) + f"\n\n{_provenance(result)}"


def calibration_grade(result: dict) -> str:
    """calibration_thresholds (bench/calibration/02_grade.py's figures): per row (old guess, HotpotQA optimum,
    calibration default) the held-out passage P / R / F1 at `relevant`, then its verdict shares; the provenance line
    comes under `calibration_support`, the same result's second table."""
    g = result["figures"]["grade"]
    labels = {"old": "old guess", "optimum": "HotpotQA optimum", "default": "calibration default"}
    rows = ["| grade thresholds relevant / incorrect / correct | split | passage P / R / F1 |", "|---|---|---|"]
    verdicts = [
        "| relevant / incorrect / correct | answerable → incorrect | unanswerable → incorrect | "
        "precision of `correct` |",
        "|---|---|---|---|",
    ]
    for name, r in g["rows"].items():
        th = " / ".join(f"{r['thresholds'][k]:.2f}" for k in ("relevant", "incorrect", "correct"))
        label = f"{labels.get(name, name)} {th}"
        label = f"**{label}**" if name == "default" else label
        h = r["held_out"]
        prf = " / ".join(f"{h[k]:.3f}".removeprefix("0") for k in ("precision", "recall", "f1"))
        rows.append(f"| {label} | held-out | {prf} |")
        shares = (h["ans_incorrect"], h["una_incorrect"], h["correct_precision"])
        verdicts.append(f"| {label} | " + " | ".join(f"{x:.1%}" for x in shares) + " |")
    tune, held = g["directions"]["tune"], g["directions"]["held_out"]
    c = g["constraints"]
    note = (
        f"Tuned on {tune['answerable']} answerable and {tune['unanswerable']} unanswerable questions, held out: "
        f"{held['answerable']} and {held['unanswerable']}; a gold paragraph is in the top 5 for "
        f"{held['gold_in_top5']:.1%} of the held-out answerable questions. Optimum on the tuning split: `relevant` "
        f"at the best passage F1, `incorrect` the largest with at most {c['max_false_incorrect']:.0%} of answerable "
        f"questions graded incorrect, `correct` the smallest whose 50/50-weighted precision is at least "
        f"{c['min_correct_precision']:.0%}."
    )
    return "\n".join(rows) + "\n\n" + "\n".join(verdicts) + "\n\n" + _wrapped(note)


def calibration_support(result: dict) -> str:
    """calibration_thresholds (bench/calibration/03_support.py): per support threshold (old guess, 0.50, tuning
    optimum; the shipped one in bold) the accuracy on fact + qa pairs, the held-out F1 / recall / TNR, and the
    shares of all distractors and of answer-swapped sentences rejected on the held-out split."""
    s = result["figures"]["support"]
    labels = {"old": "old guess", "mid": "midpoint", "new": "tuning optimum"}
    rows = [
        "| support threshold | accuracy tune / held-out | held-out F1 / recall / TNR | distractors rejected | "
        "swapped rejected |",
        "|---|---|---|---|---|",
    ]
    for name, r in s["thresholds"].items():
        tune, held = r["tune"]["fact+qa (pooled)"], r["held_out"]
        pooled = held["fact+qa (pooled)"]
        cells = [f"{tune['accuracy']:.3f} / {pooled['accuracy']:.3f}"]
        cells.append(" / ".join(f"{pooled[k]:.3f}" for k in ("f1", "recall", "tnr")))
        cells += [f"{held[k]:.1%}" for k in ("distractors_rejected", "swapped_rejected")]
        label = f"{labels.get(name, name)} {r['t']:.2f}"
        if round(r["t"], 2) == round(s["shipped"], 2):
            label, cells = f"**{label} (default)**", [f"**{c}**" for c in cells]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    b = s["bootstrap"]
    pairs = ", ".join(f"{k} {v['pairs']:,} ({v['supported']:,} supported)" for k, v in s["pairs"]["held_out"].items())
    note = (
        f"Accuracy, F1, recall and TNR on the fact + qa pairs pooled (one unsupported pair per supported one); "
        f"rejected on the held-out split: a supporting sentence against each distractor paragraph of its question "
        f"(fact-all-distractors), and with its answer swapped for another question's (swap). Held-out pairs: "
        f"{pairs}. Held-out accuracy, tuning optimum − old guess: {b['new_minus_old']:+.3f} "
        f"(bootstrap 95% interval {b['low']:+.3f} .. {b['high']:+.3f}, {b['samples']:,} resamples)."
    )
    return "\n".join(rows) + "\n\n" + _wrapped(note) + f"\n\n{_provenance(result)}"


def _calibration_set(name: str) -> str:
    return name.replace("PW ", "PhantomWiki ", 1).replace("HQ ", "HotpotQA ", 1)


def determinism(result: dict) -> str:
    """determinism: the last prompt token's logits with a cached prefix against the whole prompt; LLM calls and (when
    run) pipeline answers differing from alone, before the fix (prefix reuse) and with it (a fresh context)."""
    f = result["figures"]
    logits = f["logits"]
    rows = [
        f"| {logits['prompt_tokens']}-token prompt, evaluated after a cached prefix | max abs logit difference "
        "| greedy token | ms |",
        "|---|---|---|---|",
        f"| nothing cached: the whole prompt (the reference) | – | – | {logits['whole_ms']:,} |",
    ]
    for split in logits["splits"]:
        n = split["evaluated"]
        label = f"the last {n} token{'s' if n > 1 else ''}" + (" (half)" if 2 * n == logits["prompt_tokens"] else "")
        diff = f"{split['max_abs_diff']:.4f}" if split["max_abs_diff"] else "0"
        greedy = "same" if split["greedy_same"] else "**changed**"
        rows.append(f"| {label} | {diff} | {greedy} | {split['ms']:,} |")
    threads = logits["threads_1_vs_2_max_abs_diff"]
    rows.append(f"| the whole prompt, n_threads 1 instead of 2 | {f'{threads:.4f}' if threads else '0'} | – | – |")
    calls = f["calls"]
    before, fix = calls["ways"]["prefix_reuse"], calls["ways"]["fresh_context"]
    rows += [
        "",
        f"| LLM calls (max_tokens {calls['max_tokens']}) | replies differing from alone | mean ms per call | calls |",
        "|---|---|---|---|",
    ]
    for name, way in calls["ways"].items():
        rows.append(f"| {_WAYS[name]} | {way['differ']} of {calls['runs']} | {way['mean_ms']:,} | {way['calls']} |")
    ways = f.get("pipeline") or {}
    if ways:
        first = next(iter(ways.values()))
        rows += [
            "",
            "| pipeline, answers differing from alone | in order | reverse order | 8 threads, one barrier "
            "| mean ms per question |",
            "|---|---|---|---|---|",
        ]
        for name, p in ways.items():
            cells = [f"{p[k]['differ']} of {p[k]['answers']}" for k in ("in_order", "reverse", "threads")]
            rows.append(f"| {_WAYS[name]} | " + " | ".join(cells) + f" | {p['mean_total_ms']:,} |")
    same = "the same reply" if calls["threads_1_vs_2_same"] else "**another reply**"
    note = (
        f"LLM calls: a {logits['target_tokens']}-token request alone on a fresh model, then after requests of other "
        f"lengths sharing its prefix (two orders) and right after itself, both ways alternating in one process "
        f"({calls['runs']} sequences each); with n_threads 1 instead of 2 the request alone got {same}. Fresh context "
        f"against prefix reuse: {100 * (fix['mean_ms'] / before['mean_ms'] - 1):+.0f}% per call. "
        + (
            f"Pipeline: configs/fixed.yaml over the sample corpus, {first['questions']} sample questions, "
            f"llm.max_tokens {first['max_tokens']}, each asked alone on a freshly loaded model, then in order, in "
            f"reverse order and from 8 threads (question i % {first['questions']} in thread i) through one pipeline. "
            if ways
            else "The pipeline level was not run (--skip-pipeline). "
        )
        + _load_average(f)
    )
    return "\n".join(rows) + "\n\n" + _wrapped(note) + f"\n\n{_provenance(result)}"


def replay_check(result: dict) -> str:
    """replay_check (no folders: the committed fixture): the fixture replayed with no model, its rows against the
    committed ones, beside a fresh recording when run with --record; then the recording's size and what a run
    manifest costs."""
    f = result["figures"]
    runs = {"replay (llama_cpp and embedding runtimes unimportable)": f["replay"]}
    if "record" in f:
        runs = {"record (real model, into a temporary cache)": f["record"], **runs}

    def calls(run: dict) -> str:
        per = ", ".join(
            f"{name} {c['calls_min']}" + (f"–{c['calls_max']}" if c["calls_max"] != c["calls_min"] else "")
            for name, c in run["configs"].items()
        )
        return f"{sum(c['llm_calls'] for c in run['configs'].values())} ({per} per question)"

    cells = (
        ("questions × configs", lambda r: f"{r['questions']} × {len(r['configs'])}"),
        ("LLM calls", calls),
        ("asking time", lambda r: f"{r['asking_s']:.1f} s"),
        ("the whole command, wall", lambda r: f"{r['wall_s']:.0f} s"),
        ("peak RSS", lambda r: f"{r['peak_rss_mb']:,} MB" if "peak_rss_mb" in r else "–"),
        ("LLM replies", lambda r: _replies(r["replies"])),
        ("embedding vectors", lambda r: _replies(r["vectors"])),
        (
            "rows like the committed ones",
            lambda r: f"**{r.get('identical', r.get('like_committed'))}/{r['compared']}**",
        ),
    )
    rows = ["| | " + " | ".join(runs) + " |", "|---|" + "---|" * len(runs)]
    rows += [f"| {label} | " + " | ".join(cell(r) for r in runs.values()) + " |" for label, cell in cells]
    cache, manifest = f["cache"], f["manifest"]
    notes = [
        f"`{f['fixture']}/`: {cache['replies']['entries']} replies in {_files(cache['replies'])}, vectors in "
        f"{_files(cache['vectors'])}; the whole fixture {_files(cache['fixture'])}.",
        f"A run manifest costs {manifest['first_s']:.2f} s with no hash remembered (sha256 of "
        f"{manifest['hashed_files']} model files, {manifest['hashed_mb']:.0f} MB) and {manifest['second_s']:.2f} s "
        f"after (hashes remembered by path, size and mtime).",
        _load_average(f),
    ]
    return "\n".join(rows) + "\n\n" + "\n".join(map(_bullet, notes)) + f"\n\n{_provenance(result)}"


_WAYS = {"prefix_reuse": "prefix reuse (before)", "fresh_context": "fresh context (fix)"}  # determinism's two ways


def _replies(counts: dict) -> str:
    """Replayed / recorded counts of a reply or vector cache, as `cli.py eval` prints them."""
    if not counts:
        return "–"
    if not counts["replayed"]:
        return f"{counts['recorded']:,} recorded"
    if not counts["recorded"]:
        return f"{counts['replayed']:,} replayed"
    return f"{counts['recorded']:,} recorded, {counts['replayed']:,} already recorded"


def _files(size: dict) -> str:
    return f"{size['files']} file{'s' if size['files'] != 1 else ''} ({size['bytes'] / 1000:,.0f} KB)"


def _bullet(text: str) -> str:
    return _wrapped(text, first="- ", rest="  ")


def query_adapter(result: dict) -> str:
    """query_adapter test: per dataset and slice, nDCG@10 with and without the adapter, and the adapted hybrid's
    difference to the default and to the better single list (paired p)."""
    head = "| dataset, test queries | n | bm25 | dense | dense + adapter | hybrid (default) | **hybrid + adapter** |"
    rows = [head + " − default (p) | − better single (p) |", "|---" * 9 + "|"]
    for name, slices in result["figures"].items():
        for label, f in slices.items():
            cells = [f"{f[k]:.4f}" for k in ("bm25", "dense", "dense_adapter", "hybrid")]
            cells.append(f"**{f['hybrid_adapter']:.4f}**")
            cells += [f"{f[k]['diff']:+.4f} ({f[k]['p']:.3f})" for k in ("vs_default", "vs_best_single")]
            rows.append(f"| {name}, {label} | {f['queries']} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def injection_obedient(result: dict) -> str:
    """injection_obedient: per config and policy, the questions whose own payload succeeded, then those where the
    run obeyed any payload of the slice."""
    policies = result["config"]["policies"]
    rows = ["| config | " + " | ".join(policies) + " |", "|---" * (len(policies) + 1) + "|"]
    for name, by_policy in result["figures"].items():
        cells = []
        for policy in policies:
            f = by_policy[policy]
            named = f" ({', '.join(f['own'])})" if f["own"] and policy != "keep" else ""
            cells.append(f"{len(f['own'])}/{f['questions']}{named}; any payload {len(f['any'])}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def injection_tally(result: dict) -> str:
    """injection_tally: per recorded run and config, attack success counted two ways, and what the run cost."""
    head = "| run | config | own payload | any payload | abstained | median s | LLM calls/q |"
    rows = [head, "|---|---|---|---|---|---|---|"]
    for run, configs in result["figures"].items():
        for config, f in configs.items():
            n = f["questions"]
            own = f"**{len(f['own'])}/{n}**" + (f" ({', '.join(f['own'])})" if f["own"] else "")
            cost = [f"{f['abstained']}/{n}", f"{f['median_s']:.0f}", f"{f['llm_calls']:.1f}"]
            rows.append(f"| {run} | {config} | {own} | {len(f['any'])}/{n} | " + " | ".join(cost) + " |")
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def dev_loop(result: dict) -> str:
    """dev_loop: set-up from a fresh clone with an empty pip cache, the full suite under `.ci/run`, the fast lane."""
    f = result["figures"]
    rows = ["| step (fresh clone) | tests | seconds |", "|---|---|---|"]
    rows.append(f"| set-up (`bash setup.sh`, empty pip cache) | – | {f['setup_seconds']:,.0f} |")
    for key, label in (("full_suite", "full suite (`.ci/run`)"), ("fast_lane", "fast lane")):
        if f.get(key):
            rows.append(f"| {label} | {_counts(f[key])} | {f[key]['seconds']:,.0f} |")
    status = f.get("ci_rc", f.get("setup_rc"))
    verdict = f"`.ci/run` exit status {status}" + (" (green)" if status == 0 else " (**red**)")
    return "\n".join(rows) + f"\n\n{verdict}; clone of {f['clone_of'][:8]}.\n\n{_provenance(result)}"


def dev_loop_line(result: dict) -> str:
    """dev_loop as one sentence, for README.md."""
    f = result["figures"]
    parts = [f"set-up {f['setup_seconds'] / 60:.1f} min"]
    for key, label in (("full_suite", "full suite"), ("fast_lane", "fast lane")):
        if f.get(key):
            parts.append(f"{label} {_counts(f[key])} in {_duration(f[key]['seconds'])}")
    line = (
        f"Measured from a fresh clone on {result['machine']['cores']} cores ({result['finished'][:10]}): "
        f"{', '.join(parts)} (`python -m bench run dev_loop`)."
    )
    return _wrapped(line)


def serve_load(result: dict) -> str:
    """serve_load (one server): every phase's routes, then each phase's load, CPU and RSS, and the upload jobs."""
    figures = result["figures"]
    rows = [
        "| phase | route | requests | req/s | p50 ms | p95 ms | back-pressure (429/503) | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for run in figures["runs"]:
        for phase in run["phases"]:
            label = f"{phase['users']} users × {phase['seconds']} s"
            for i, (route, r) in enumerate(phase["routes"].items()):
                rows.append(
                    f"| {label if i == 0 else ''} | `{route}` | {r['requests']:,} | {r['rps']:.2f} | "
                    f"{r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {phase['backpressure'].get(route, 0):,} | "
                    f"{r['failures']} |"
                )
            rss, load, cpu = phase["rss_mb"], phase["load_average_1m"], phase["cpu_s"]
            notes.append(
                f"{label}: load average {load[0]} → {load[1]}; CPU seconds: server {cpu['servers']:.0f}, Locust "
                f"{cpu['locust']:.0f}; server RSS {rss['after_warm_up']:,.0f} MB after {rss['warm_up_s']:g} s → "
                f"{rss['end']:,.0f} MB at the end ({rss['growth_pct']:+.1f}%), peak {rss['peak']:,.0f} MB."
            )
        notes.append(f"Upload jobs: {_states(run['upload_jobs'])}.")
    return "\n".join(rows) + "\n\n" + "\n".join(f"- {n}" for n in notes) + f"\n\n{_provenance(result)}"


def serve_load_tracing(result: dict) -> str:
    """serve_load --tracing off on: p50 per route without and with tracing, and the server's CPU per request."""
    runs = {run["tracing"]: run for run in result["figures"]["runs"]}
    off, on = runs["off"]["phases"][0], runs["on"]["phases"][0]
    rows = ["| route | p50 off ms | p50 on ms | p50 change |", "|---|---|---|---|"]
    for route, r in off["routes"].items():
        if route in on["routes"] and route.startswith("POST /v1/"):
            a, b = r["p50_ms"], on["routes"][route]["p50_ms"]
            rows.append(f"| `{route}` | {a:.0f} | {b:.0f} | {(b / a - 1) * 100:+.0f}% |")
    rows += ["", "| tracing | load average (start → end) | server CPU s | requests answered | CPU ms per request |"]
    rows.append("|---|---|---|---|---|")
    for name, phase in (("off", off), ("on", on)):
        answered = sum(r["requests"] for r in phase["routes"].values())
        cpu = phase["cpu_s"]["servers"]
        load = phase["load_average_1m"]
        rows.append(f"| {name} | {load[0]} → {load[1]} | {cpu:.1f} | {answered:,} | {cpu * 1000 / answered:.0f} |")
    return "\n".join(rows) + f"\n\n{_provenance(result)}"


def serve_load_servers(result: dict) -> str:
    """serve_load_servers: the first phase on each set of servers side by side, and PostgreSQL's restart."""
    figures = result["figures"]
    lines = [servers_comparison(figures)]
    for run in figures["runs"]:
        for phase in run["phases"]:
            if outage := phase.get("outage"):
                exited = [f["error"] for f in phase["failures"] if f["route"] == "server"]
                back = outage["all_healthy_after_start_s"]
                lines.append(
                    f"{run['name']} ({phase['users']} users x {phase['seconds']} s): PostgreSQL stopped "
                    f"{outage['stopped_at_s']} s in, started again {outage['down_s']} s later; `/healthz` answered "
                    f"{', '.join(map(str, outage['healthz_codes_seen']))} meanwhile, "
                    + (
                        f"every server 200 again {back} s after the start"
                        if back is not None
                        else "not every server 200 again within 120 s"
                    )
                    + (f", server(s) {'; '.join(exited)}" if exited else ", none restarted")
                    + f"; the slowest reply "
                    f"took {phase['slowest_reply_ms'] / 1000:.1f} s (request timeout {figures['server']['timeout_s']} "
                    f"s); upload jobs: {_states(run['upload_jobs'])}."
                )
    return "\n\n".join(lines) + f"\n\n{_provenance(result)}"


def servers_comparison(figures: dict) -> str:
    """serve_load's first phase of every run side by side: p50 / p95 ms per route, then the run's totals."""
    runs = [r for r in figures["runs"] if r["phases"]]
    first = [r["phases"][0] for r in runs]
    rows = ["| | " + " | ".join(r["name"] for r in runs) + " |", "|---|" + "---|" * len(runs)]
    for route in first[0]["routes"]:
        cells = [p["routes"].get(route) for p in first]
        rows.append(
            f"| {route} p50 / p95 ms | "
            + " | ".join(f"{c['p50_ms']:.0f} / {c['p95_ms']:.0f}" if c else "–" for c in cells)
            + " |"
        )
    totals = (
        ("requests answered", lambda p: f"{sum(r['requests'] for r in p['routes'].values()):,}"),
        ("429/503 with Retry-After", lambda p: f"{sum(p['backpressure'].values()):,}"),
        ("errors", lambda p: str(p["errors"])),
        ("servers' CPU s", lambda p: f"{p['cpu_s']['servers']:.0f}"),
        ("servers' peak RSS MB", lambda p: f"{p['rss_mb']['peak']:,.0f}"),
    )
    rows += [f"| {label} | " + " | ".join(cell(p) for p in first) + " |" for label, cell in totals]
    rows.append(
        "| upload jobs done / accepted (the whole run) | "
        + " | ".join(f"{r['upload_jobs']['states'].get('done', 0)} / {r['upload_jobs']['jobs']}" for r in runs)
        + " |"
    )
    return "\n".join(rows)


def _states(jobs: dict) -> str:
    states = ", ".join(f"{n} {state}" for state, n in jobs["states"].items())
    return f"{jobs['jobs']} read back ({states}), {len(jobs['file_errors'])} files in error"


def _counts(summary: dict) -> str:
    return ", ".join(f"{summary[k]:,} {k}" for k in ("passed", "skipped", "failed", "error") if summary.get(k))


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


_SINGLE_LABELS = {"bm25": "bm25", "dense": "dense (windows)", "chunk": "dense (chunk vectors)", "e5": "e5 (chunks)"}
_TOTALS = (("total", "total"), ("llm", "inside LLM calls"), ("overhead", "**pipeline overhead**"))


def _load_average(figures: dict) -> str:
    start, end = (" / ".join(f"{x:.1f}" for x in figures["load_average"][k]) for k in ("start", "end"))
    return f"Load average (1 / 5 min) {start} at the start, {end} at the end."


def _wrapped(text: str, first: str = "", rest: str = "") -> str:
    """`text` in lines of at most 120 characters (docs' limit), the first line led by `first`, the others by `rest`."""
    lines = textwrap.wrap(
        text, 120, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(lines)


def _provenance(result: dict) -> str:
    sha = (result["commit"]["sha"] or "unknown")[:8] + ("+" if result["commit"]["dirty"] else "")
    m = result["machine"]
    command = " ".join(result["command"])
    line = (
        f"*`{command}` at {sha}, {result['finished'][:10]}; {m['cores']} cores, {m['memory_gib']:.0f} GiB, "
        f"Python {m['python']} (bench/results/{result['benchmark']}.json).*"
    )
    return _wrapped(line)
