"""Issue 22's comparison: the fixed pipeline, no-llm and every agent strategy under both router protocols, one table.

    .venv/bin/python bench/agent_compare.py phantomwiki --per-difficulty 4 --limit 16 \\
        --out bench/eval/agent-compare-phantomwiki-s11 --llm-cache bench/eval/agent-compare-phantomwiki-s11/llm-cache
    .venv/bin/python bench/agent_compare.py hotpotqa --limit 100 --out bench/eval/agent-compare-hotpotqa100 \\
        --llm-cache bench/eval/agent-compare-hotpotqa100/llm-cache
    # the same grid through any OpenAI-compatible server (a llama.cpp server, vLLM, Ollama, OpenAI):
    .venv/bin/python bench/agent_compare.py phantomwiki --backend openai --base-url http://127.0.0.1:8765/v1 \\
        --model smollm2 --out /tmp/agent-compare-openai --llm-cache /tmp/agent-compare-openai/llm-cache
    # again without any model, from the recorded replies:
    .venv/bin/python bench/agent_compare.py phantomwiki --per-difficulty 4 --limit 16 --out ... --llm-cache ... --replay

A thin driver over `cli.py eval`: it writes one config per grid cell into OUT/grid/ (`fixed`, `no-llm`, and
`<strategy>-<protocol>` for every strategy of nodes/strategies/ under `json` and `tools`, `plan` under json only),
each the committed configs/*.yaml of that strategy with the protocol and the `llm:` section the options ask for,
then runs `cli.py eval` over them (paired against `fixed`), and prints the grid's table from report.json: quality
with 95% intervals, cost (LLM calls, prompt tokens, p50 latency of the rows the model answered, "–" where every
reply came from the reply cache), the paired F1 difference against fixed with its Holm-adjusted p and minimum
detectable difference, the failure modes of each config (evaluation/failures.py), and F1 / contains by difficulty
(also written to OUT/table.md). Everything `cli.py eval` writes (report.md/json, questions.jsonl, manifest.json,
plots, resolved configs) is in OUT; an interrupted run resumes where it stopped.

Datasets: `phantomwiki` (../shared/datasets/phantomwiki-s11; `--per-difficulty N` keeps the first N questions of
each difficulty, written round-robin over the difficulties into OUT/dataset/ so that `--limit` keeps the balance
while each difficulty lasts: s11 has 27 / 38 / 11 / 4 questions of difficulty 1-4, `--per-difficulty 38` all 80),
`hotpotqa` (dev500 questions 301-400 first, every dev500 paragraph indexed, as the issue-13 comparison; written
under bench/out/), or the path of any dataset `cli.py eval` reads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from common import HOTPOTQA, PHANTOMWIKI, ROOT

STRATEGY_CONFIGS = {  # strategy -> the committed config of its JSON-protocol agent
    "zeroshot": "agent-zeroshot.yaml",
    "zeroshot-think": "agent-zst.yaml",
    "react": "agent.yaml",
    "plan": "agent-plan.yaml",
    "plan-react": "agent-plan-react.yaml",
    "bolaa": "agent-bolaa.yaml",
    "autogpt": "agent-autogpt.yaml",
}
TOOLS_N_CTX = 4096  # the embedded model's context for the tools cells (SmolLM2 is trained on 8192)
JSON_ONLY = {"plan"}  # plan writes a whole plan per call: no single tool call to make


def grid_configs(backend: str, base_url: str | None, model: str | None, api_key_env: str | None) -> dict[str, dict]:
    """name -> config mapping of every grid cell, on the requested LLM backend."""

    def load(name: str) -> dict:
        return yaml.safe_load((ROOT / "configs" / name).read_text()) or {}

    cells = {"fixed": load("fixed.yaml"), "no-llm": load("no-llm.yaml")}
    for strategy, file in STRATEGY_CONFIGS.items():
        for protocol in ("json",) if strategy in JSON_ONLY else ("json", "tools"):
            config = load(file)
            config["graph"]["router"]["protocol"] = protocol
            cells[f"{strategy}-{protocol}"] = config
    for name, config in cells.items():
        tools = name.endswith("-tools")
        if backend == "openai":
            llm = {k: v for k, v in (config.get("llm") or {}).items() if k in ("temperature", "max_tokens")}
            llm.update(
                backend="openai",
                model=model or "smollm2",
                base_url=base_url,
                **({"api_key_env": api_key_env} if api_key_env else {}),
            )
            config["llm"] = {k: v for k, v in llm.items() if v is not None}
        elif tools:  # the embedded model chooses a tool only through llama-cpp-python's function-calling format,
            # which writes every tool's schema into the prompt: bolaa's and autogpt's prompts then pass 2048 tokens
            config.setdefault("llm", {}).update(
                backend="local", chat_format="chatml-function-calling", n_ctx=TOOLS_N_CTX
            )
    return cells


def phantomwiki_subset(per_difficulty: int, out: Path) -> Path:
    """The first N questions of each difficulty, round-robin over the difficulties, beside the full articles."""
    questions = json.loads((PHANTOMWIKI / "questions.json").read_text())
    by_level: dict[str, list] = {}
    for q in questions:
        by_level.setdefault(str(q.get("difficulty", "-")), []).append(q)
    kept = [by_level[level][:per_difficulty] for level in sorted(by_level)]
    ordered = [q for i in range(per_difficulty) for level in kept if i < len(level) for q in [level[i]]]
    folder = out / "dataset"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PHANTOMWIKI / "articles.json", folder / "articles.json")
    (folder / "questions.json").write_text(json.dumps(ordered, indent=1, ensure_ascii=False) + "\n")
    return folder


def hotpotqa_file() -> Path:
    """dev500 questions 301-400 first, then the rest (so that every question's paragraphs are indexed)."""
    lines = (HOTPOTQA / "dev500.jsonl").read_text().splitlines()
    path = ROOT / "bench" / "out" / "dev500-301-400-first.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines[300:400] + lines[:300] + lines[400:]) + "\n")
    return path


def _fmt(x, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _seconds(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1e3:.1f}"


def table(report: dict, names: list[str]) -> str:
    """The grid's tables (markdown) from a report.json: quality, cost, paired against fixed, failure modes, and F1
    by difficulty."""
    configs, paired, failures = report["configs"], report.get("paired") or {}, report.get("failures") or {}
    names = [n for n in names if n in configs]
    lines = [
        "| config | F1 [95% CI] | EM | contains | gold recall | abstained | LLM calls/q | prompt tok/q | p50 s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        c = configs[name]
        ci = c["ci95"]["f1"] or {}
        lines.append(
            f"| {name} | {_fmt(ci.get('mean'))} [{_fmt(ci.get('low'))}, {_fmt(ci.get('high'))}] "
            f"| {_fmt(c['exact_match']['mean'])} | {_fmt(c['contains']['mean'])} "
            f"| {_fmt(c['gold_recall']['mean'])} | {_fmt(c['abstention_rate']['mean'], 2)} "
            f"| {c['llm_calls']['mean']:.1f} | {c['prompt_tokens']['mean']:,.0f} "
            f"| {_seconds(c['latency_p50_ms']['mean'])} |"
        )
    if paired:
        lines += [
            "",
            f"| config | F1 − {report['baseline']} [95% CI] | p (Holm) | MDE | W/L/T | "
            "contains − fixed [95% CI] | p (Holm) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name in names:
            if name in paired:
                f1, co = paired[name]["f1"], paired[name]["contains"]
                lines.append(
                    f"| {name} | {f1['diff']:+.3f} [{f1['ci95'][0]:+.3f}, {f1['ci95'][1]:+.3f}] "
                    f"| {f1['p']:.3f} ({f1['p_holm']:.3f}) | ±{f1['minimum_detectable_difference']:.3f} "
                    f"| {f1['wins']}/{f1['losses']}/{f1['ties']} "
                    f"| {co['diff']:+.3f} [{co['ci95'][0]:+.3f}, {co['ci95'][1]:+.3f}] "
                    f"| {co['p']:.3f} ({co['p_holm']:.3f}) |"
                )
    if failures:
        modes = list(next(iter(failures.values()))["modes"])
        lines += [
            "",
            "Failure modes: questions (occurrences); "
            + ", ".join(f"{chr(97 + i)} = {m}" for i, m in enumerate(modes))
            + "; errors = questions that failed",
            "",
            "| config | " + " | ".join(chr(97 + i) for i in range(len(modes))) + " | errors |",
            "|---|" + "---|" * (len(modes) + 1),
        ]
        for name in names:
            per = failures[name]["modes"]
            lines.append(
                f"| {name} | "
                + " | ".join(f"{per[m]['questions']} ({per[m]['events']})" for m in modes)
                + f" | {configs[name]['errors']['mean']:.0f} |"
            )
    levels = list(report.get("by_difficulty") or {})
    if len(levels) > 1:
        by = report["by_difficulty"]
        lines += [
            "",
            "F1 / contains by difficulty (n questions × runs)",
            "",
            "| config | " + " | ".join(f"difficulty {d}" for d in levels) + " |",
            "|---|" + "---|" * len(levels),
        ]
        for name in names:
            lines.append(
                f"| {name} | "
                + " | ".join(
                    f"{_fmt(by[d][name]['f1'])} / {_fmt(by[d][name]['contains'])} (n={by[d][name]['n']})"
                    if name in by[d]
                    else "–"
                    for d in levels
                )
                + " |"
            )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("dataset", help="phantomwiki, hotpotqa, or a dataset path cli.py eval reads")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--per-difficulty", type=int, metavar="N", help="phantomwiki: the first N of each difficulty")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these grid cells (e.g. fixed react-json)")
    p.add_argument("--backend", choices=["local", "openai"], default="local")
    p.add_argument("--base-url", help="the OpenAI-compatible server, e.g. http://127.0.0.1:8765/v1")
    p.add_argument("--model", help="the model name the server expects (default smollm2)")
    p.add_argument("--api-key-env", help="NAME of the env var holding the server's key")
    p.add_argument("--llm-cache", metavar="DIR", help="record every LLM reply in DIR (replayed when recorded)")
    p.add_argument(
        "--vector-cache",
        metavar="DIR",
        help="record every embedding vector in DIR (replayed when "
        "recorded): replays then need neither this machine's embedding runtime nor its index",
    )
    p.add_argument(
        "--replay", action="store_true", help="answer only from --llm-cache DIR (and --vector-cache DIR), with no model"
    )
    p.add_argument(
        "--retry-errors",
        action="store_true",
        help="ask again the rows of --out that failed (cli.py eval keeps a failed row as it is on resume otherwise)",
    )
    p.add_argument(
        "--index-dir",
        metavar="DIR",
        help="where the collection lives (default: one folder per --out under "
        "bench/out/agent-compare-index: the same documents read from another path cannot share one)",
    )
    p.add_argument("--workers", type=int, default=1)
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every grid cell (e.g. llm.n_threads=1)",
    )
    args = p.parse_args()
    if args.backend == "openai" and not args.base_url:
        p.error("--backend openai needs --base-url")
    out = Path(args.out)
    index_dir = args.index_dir or str(
        ROOT
        / "bench"
        / "out"
        / "agent-compare-index"
        / (f"{out.resolve().name}-{hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:8]}")
    )
    if args.dataset == "phantomwiki":
        dataset = phantomwiki_subset(args.per_difficulty, out) if args.per_difficulty else PHANTOMWIKI
    elif args.dataset == "hotpotqa":
        dataset = hotpotqa_file()
    else:
        dataset = Path(args.dataset)
    cells = grid_configs(args.backend, args.base_url, args.model, args.api_key_env)
    names = [n for n in cells if not args.only or n in args.only]
    grid = out / "grid"
    grid.mkdir(parents=True, exist_ok=True)
    for name in names:
        (grid / f"{name}.yaml").write_text(yaml.safe_dump(cells[name], sort_keys=False))
    command = [
        sys.executable,
        str(ROOT / "cli.py"),
        "eval",
        str(dataset),
        "--out",
        str(out),
        "--index-dir",
        index_dir,
        "--workers",
        str(args.workers),
        "--plot-metric",
        "contains",
        "--configs",
        *[str(grid / f"{n}.yaml") for n in names],
    ]
    command += [arg for override in args.overrides for arg in ("--set", override)]
    command += ["--baseline", "fixed"] if "fixed" in names else []
    command += ["--limit", str(args.limit)] if args.limit else []
    command += ["--llm-cache", args.llm_cache] if args.llm_cache else []
    command += ["--vector-cache", args.vector_cache] if args.vector_cache else []
    command += ["--replay"] if args.replay else []
    command += ["--retry-errors"] if args.retry_errors else []
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        return done.returncode
    text = table(json.loads((out / "report.json").read_text()), names)
    (out / "table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
