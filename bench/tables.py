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
    head = ["split (queries)", "metric", "bm25", "dense (windows)", "dense (chunk vectors)", *chosen]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, metrics in result["figures"]["datasets"].items():
        for metric, f in metrics.items():
            best = max(_SINGLES, key=lambda r: f[r])
            singles = [f"**{f[r]:.4f}**" if r == best else f"{f[r]:.4f}" for r in _SINGLES]
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
    start, end = (" / ".join(f"{x:.1f}" for x in f["load_average"][k]) for k in ("start", "end"))
    note = (
        f"{f['docs']} SciFact abstracts in {f['files']} files, {f['chunks']} chunks; load average (1 / 5 min) "
        f"{start} at the start, {end} at the end."
    )
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
    return "\n".join(textwrap.wrap(line, 120, break_long_words=False, break_on_hyphens=False))


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


_SINGLES = ("bm25", "dense", "chunk")
_TOTALS = (("total", "total"), ("llm", "inside LLM calls"), ("overhead", "**pipeline overhead**"))


def _provenance(result: dict) -> str:
    sha = (result["commit"]["sha"] or "unknown")[:8] + ("+" if result["commit"]["dirty"] else "")
    m = result["machine"]
    command = " ".join(result["command"])
    line = (
        f"*`{command}` at {sha}, {result['finished'][:10]}; {m['cores']} cores, {m['memory_gib']:.0f} GiB, "
        f"Python {m['python']} (bench/results/{result['benchmark']}.json).*"
    )
    return "\n".join(textwrap.wrap(line, 120, break_long_words=False, break_on_hyphens=False))
