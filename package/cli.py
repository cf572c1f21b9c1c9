#!/usr/bin/env python3
"""Switchyard command line: a thin layer that parses arguments, calls the library and prints.

Every error ends in a one-line `error: …` on stderr and a non-zero exit, never a traceback: our own errors
(errors.py) exit with their class's code; anything unexpected exits 1 and its traceback goes to the error log
(`$SWITCHYARD_CACHE_DIR/errors.log`, default ~/.cache/switchyard; SWITCHYARD_DEBUG=1 raises it instead). A closed
pipe (`cli.py list --json | head`) ends the command quietly, as Unix tools do.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from pathlib import Path

from switchyard.llm.context import ALL
from switchyard.errors import EXIT_FAIL, EXIT_USAGE, SwitchyardError, first_line
from switchyard.extras import needs_extra

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a Unix tool killed by a closed pipe reports


class CliError(SwitchyardError):
    """A command-line mistake found by the CLI itself (an empty query, a bad option value)."""

    def __init__(self, message: str, code: int = EXIT_FAIL):
        super().__init__(message)
        self.exit_code = code


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config", metavar="FILE", help="pipeline YAML (defaults < FILE < --set)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value, e.g. --set retrieve.fusion.method=rrf (repeatable)")
    p.add_argument("--index-dir", metavar="DIR", help="index location (LanceDB URI); overrides store.uri")
    p.add_argument("--collection", metavar="NAME", help="collection (table) to use; overrides store.collection")
    return p


def _served(config_help: str) -> argparse.ArgumentParser:
    """The options of the long-running servers (serve, mcp): several pipelines over one index."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config", dest="configs", action="append", metavar="FILE", help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a value in every config (repeatable)")
    p.add_argument("--index-dir", metavar="DIR", help="index location (LanceDB URI); overrides store.uri")
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="cli.py", description="Switchyard: retrieval-augmented QA over your documents")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", parents=[common], help="add or update documents (files or folders)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--acl", metavar="LABELS", help="access labels of the documents, e.g. hr,finance: only keys with "
                                                   "one of these groups read them (a corpus record's own `acl` wins)")
    p.add_argument("--ray", metavar="ADDRESS", help="read, chunk and embed on the Ray cluster at ADDRESS (`auto`: the "
                                                    "one running here); needs the ray extra (docs/ray.md)")

    p = sub.add_parser("ask", parents=[common], help="answer a question over the indexed documents")
    p.add_argument("question")
    p.add_argument("--where", metavar="FILTER", help="restrict retrieval, e.g. \"source~handbook\"")
    p.add_argument("--json", action="store_true", help="print one JSON object (answer, citations, trace, usage, config)")
    p.add_argument("--trace", action="store_true", help="show every node's input/output summary and timing")

    p = sub.add_parser("trace", help="replay a saved run (`ask --json` output) step by step")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--delay", type=float, default=0.0, help="seconds to pause between steps")

    p = sub.add_parser("graph", parents=[common], help="draw the compiled pipeline graph (offline)")
    p.add_argument("--format", choices=["mermaid", "ascii", "png", "svg"], default="mermaid")
    p.add_argument("--out", metavar="FILE", help="write to FILE (required for png)")

    p = sub.add_parser("search", parents=[common], help="ranked passages for a query")
    p.add_argument("query")
    p.add_argument("--k", type=int, default=None, help="passages to show (default: rerank.top_k)")
    p.add_argument("--where", metavar="FILTER", help="metadata filter, e.g. \"source~manual and page=2\"")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("list", parents=[common], help="indexed documents")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("delete", parents=[common], help="remove documents by id or by source path")
    p.add_argument("targets", nargs="+", metavar="DOC_ID|PATH")

    p = sub.add_parser("eval-retrieval", parents=[common],
                       help="nDCG/recall/MRR on BEIR folders (several: one table and the macro average)")
    p.add_argument("datasets", nargs="+", metavar="DIR")
    p.add_argument("--fusion", dest="fusions", action="append", default=[], metavar="NAME=KEY=VALUE",
                   help="also score a fusion variant NAME with retrieve.fusion.KEY=VALUE over the same lists, e.g. "
                        "--fusion z=normalization=zscore (repeat a NAME to set several keys)")
    p.add_argument("--split", default="test", help="qrels split to score (default: test)")
    p.add_argument("--limit", type=int, help="only the first N queries (sorted by id)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", metavar="FILE", help="also write the JSON result (with the resolved config) here")

    p = sub.add_parser("fit-adapter", parents=[common],
                       help="fit a query adapter for dense search on a BEIR folder's labelled queries")
    p.add_argument("dataset", metavar="DIR")
    p.add_argument("--out", required=True, metavar="FILE.npz", help="where to write the adapter")
    p.add_argument("--split", default="train", help="qrels split to learn from (default: train)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--negatives", type=int, default=30, help="hard negative chunks per query (default: 30)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("eval", help="compare pipeline configs on a QA dataset (accuracy, grounding, cost)")
    p.add_argument("dataset", metavar="DATASET", help="PhantomWiki folder, HotpotQA JSON/JSONL, or plain JSONL")
    p.add_argument("--configs", nargs="+", required=True, metavar="YAML", help="pipeline configs to compare")
    p.add_argument("--runs", type=int, default=1, help="runs per config and question (mean ± SD)")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--out", default="eval-out", metavar="DIR", help="report folder (resumes if it has results)")
    p.add_argument("--corpus", metavar="PATH", help="documents to index, for a plain JSONL dataset")
    p.add_argument("--index-dir", metavar="DIR", help="where eval collections live (default: DIR/index)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a value in every config (repeatable)")
    p.add_argument("--judge", metavar="YAML", help="also judge faithfulness with the LLM of this config's llm: "
                   "section (off by default; e.g. configs/fixed-openai.yaml)")
    p.add_argument("--baseline", metavar="NAME", help="config the others are paired against (default: fixed, if "
                   "compared, else the first)")
    p.add_argument("--retry-errors", action="store_true", help="ask again the questions that failed last time")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="questions in flight at once through one process (default 1; e.g. 8 against a model server)")
    p.add_argument("--plot-metric", choices=["f1", "contains", "exact_match"], default="f1",
                   help="accuracy metric of the plots (default: f1)")
    p.add_argument("--llm-cache", metavar="DIR", help="record every LLM request and reply in DIR; requests "
                   "recorded before are answered from it (sets llm.cache_dir)")
    p.add_argument("--vector-cache", metavar="DIR", help="record every embedding vector computed in DIR; texts "
                   "recorded before are answered from it (sets embedding.vector_cache)")
    p.add_argument("--replay", action="store_true", help="answer every LLM request from --llm-cache DIR, with no "
                   "model, and every embedding from --vector-cache DIR; what was never recorded is an error")
    p.add_argument("--allow-mixed", action="store_true", help="resume into --out even though its manifest differs "
                   "(code, models, prompts, configs, collections...); the differences are recorded")
    p.add_argument("--ray", metavar="ADDRESS", help="ask the questions on the Ray cluster at ADDRESS (`auto`: the "
                                                    "one running here), ray.actors actors; needs the ray extra")
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("serve", parents=[_served("pipeline to serve, by file or shipped name (repeatable; default: "
                                                 "fixed); requests pick one by its file stem")],
                       help="run the HTTP service (API, streaming, OpenAI-compatible endpoint, web page)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-in-flight", type=int, default=4, metavar="N",
                   help="runs at once; beyond it requests get 429 with Retry-After (default 4)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per-request run timeout (default 120)")
    p.add_argument("--max-question-chars", type=int, default=2000, metavar="N")
    p.add_argument("--max-upload-files", type=int, default=20, metavar="N")
    p.add_argument("--max-upload-mb", type=float, default=20.0, metavar="MB", help="per uploaded file (default 20)")
    p.add_argument("--upload-dir", default=".switchyard/uploads", metavar="DIR",
                   help="where uploaded files are kept (default .switchyard/uploads)")
    p.add_argument("--no-warm-up", action="store_true", help="load models on the first request, not at start")
    p.add_argument("--audit-log", metavar="FILE", help="append one JSON line per request here (key name, route, "
                                                       "collection, status, ms; never the key)")
    p.add_argument("--audit-questions", action="store_true", help="put the question in the audit lines too")

    p = sub.add_parser("keys", help="API keys of the index: create (printed once), list, revoke")
    keys = p.add_subparsers(dest="keys_action", required=True, metavar="ACTION")
    key_common = argparse.ArgumentParser(add_help=False, parents=[common])
    key_common.add_argument("--upload-dir", default=".switchyard/uploads", metavar="DIR",
                            help="where the key file lives when the index is on object storage")
    k = keys.add_parser("create", parents=[key_common], help="create a key and print it (once)")
    k.add_argument("name")
    k.add_argument("--collections", metavar="C1,C2", help="the collections it may read (required unless --admin)")
    k.add_argument("--write", action="store_true", help="may also upload to and delete from them")
    k.add_argument("--admin", action="store_true", help="every collection and document; may create collections")
    k.add_argument("--groups", metavar="G1,G2", help="access groups: documents labelled (ingest --acl) with one of "
                                                     "them are readable; unlabelled ones always are")
    k.add_argument("--rpm", type=int, default=0, metavar="N", help="requests per minute (default 0: no limit)")
    k.add_argument("--max-in-flight", type=int, default=0, metavar="N", help="runs at once (default 0: no limit)")
    k = keys.add_parser("list", parents=[key_common], help="the keys (names and rights; never the keys)")
    k.add_argument("--json", action="store_true")
    k = keys.add_parser("revoke", parents=[key_common], help="delete a key: it stops working at once")
    k.add_argument("name")

    sub.add_parser("mcp", parents=[_served("pipeline the `ask` tool can use, by file or shipped name (repeatable; "
                                           "default: fixed); the first is the default and the one `search` uses")],
                   help="serve the MCP server over stdio (tools search, ask, list_collections; documents as "
                        "resources), for MCP hosts such as Claude Desktop")

    p = sub.add_parser("config", parents=[common], help="show the resolved config")
    p.add_argument("action", choices=["show"])
    p.add_argument("--json", action="store_true")
    return parser


def _load_config(args):
    from switchyard.configs.loader import load_config

    overrides = list(args.overrides)
    if getattr(args, "index_dir", None):
        overrides.append(f"store.uri={args.index_dir}")
    if getattr(args, "collection", None):
        overrides.append(f"store.collection={args.collection}")
    return load_config(args.config, overrides)


def _stack(args):
    from switchyard.retrievers.pipeline import RetrievalStack

    return RetrievalStack(_load_config(args))


def _ray_module(name: str):
    """A Ray module of Switchyard (retrievers.ray_ingest, evaluation.ray_runner), imported only for --ray."""
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "ray":
            raise CliError("--ray needs Ray: install the ray extra (pip install -e '.[ray]', done by setup.sh)",
                           EXIT_USAGE) from exc
        raise


def cmd_ingest(args) -> int:
    ray_ingest = _ray_module("switchyard.retrievers.ray_ingest") if args.ray else None
    stack = _stack(args)
    ingestor = stack.ingestor(progress=False if args.no_progress else None)
    executor = None
    if ray_ingest:
        ray_ingest.connect(args.ray)
        executor = ray_ingest.RayExecutor(stack.config, stack.store.windows, progress=ingestor.progress,
                                          fields=stack.store.vector_fields)
    report = ingestor.run(args.paths, acl=args.acl, executor=executor)
    for err in report.errors:
        print(f"error: {err}", file=sys.stderr)
    print(f"{stack.collection}: {report.summary()}")
    return 0 if report.ingested or not report.errors else EXIT_FAIL


def _format_scores(p) -> str:
    parts = []
    for name, value in p.scores.items():
        rank = p.ranks.get(name)
        parts.append(f"{name} {value:.4f}" + (f" (#{rank})" if rank else ""))
    return ", ".join(parts)


def cmd_search(args) -> int:
    if not args.query.strip():
        raise CliError("the query is empty", EXIT_USAGE)
    if args.k is not None and args.k < 1:
        raise CliError("--k must be >= 1", EXIT_USAGE)
    from switchyard.graphs.app import Pipeline

    pipe = Pipeline(_load_config(args))
    stack = pipe.resources.stack
    result = pipe.search(args.query, where=args.where, top_k=args.k)  # what `ask` retrieves in its first round
    if args.json:
        from switchyard.configs.loader import config_to_dict

        print(json.dumps({"query": args.query, "collection": stack.collection,
                          "results": [p.to_dict() for p in result.passages],
                          "timings_ms": result.timings_ms, "config": config_to_dict(stack.config)}, indent=2))
        return 0
    if not result.passages:
        print("no matching passages")
    for i, p in enumerate(result.passages, start=1):
        page = f", p. {p.page}" + (f"-{p.page_end}" if p.page_end and p.page_end != p.page else "") if p.page else ""
        print(f"{i}. {p.title}  [{p.doc_id}]  {p.source}{page}")
        print(f"   score {p.score:.4f}: {_format_scores(p)}")
        snippet = " ".join(p.text.split())
        print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}")
    return 0


def _print_trace(trace: list[dict]) -> None:
    for i, entry in enumerate(trace, start=1):
        llm = f", {entry['llm_calls']} LLM call(s), {entry['prompt_tokens']}+{entry['completion_tokens']} tokens" \
            if entry.get("llm_calls") else ""
        print(f"  {i}. {entry['node']}  {entry['ms']:.0f} ms{llm}")
        for direction, arrow in (("input", "<"), ("output", ">")):
            for key, value in entry.get(direction, {}).items():
                if key == "question":
                    continue
                text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
                print(f"     {arrow} {key}: {text[:240]}")


def _print_steps(steps: list[dict], delay: float = 0.0) -> None:
    import time

    for s in steps:
        call = s["action"] + (f"({json.dumps(s['args'], ensure_ascii=False)})" if s.get("args") else "")
        guard = f"  [guard: {s['guard']}]" if s.get("guard") else ""
        cost = f"router {s.get('router_ms', 0):.0f} ms, {s.get('llm_calls', 0)} LLM call(s), " \
               f"{s.get('prompt_tokens', 0)}+{s.get('completion_tokens', 0)} tokens; action {s.get('action_ms', 0):.0f} ms"
        print(f"  step {s['step']}: {call}{guard}")
        if s.get("agent"):  # bolaa: the controller's hand-off
            print(f"     hand-off: {s['agent']} <- {s.get('message') or '-'}")
        if s.get("thought"):
            print(f"     thought: {s['thought']}")
        for key in ("plan", "criticism"):  # autogpt's other thoughts
            if (s.get("thoughts") or {}).get(key):
                print(f"     {key}: {s['thoughts'][key]}")
        if s.get("plan"):  # plan-react: the plan this step saw
            print(f"     plan: {', '.join(s['plan'])}")
        if s.get("memory"):
            print(f"     memory: {len(s['memory'])} note(s)" + (", summarised" if s.get("memory_summarised") else ""))
        print(f"     observation: {s.get('observation', '')}")
        print(f"     ({cost})")
        if delay:
            time.sleep(delay)


def cmd_trace(args) -> int:
    from pathlib import Path

    path = Path(args.file)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"trace file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: not a JSON trace ({exc})") from None
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict) or not isinstance(data.get("steps", data.get("trace")), list):
        raise CliError(f"{path}: expected the JSON printed by `cli.py ask --json` (with 'steps' or 'trace')")
    if data.get("question"):
        print(f"question: {data['question']}")
    if data.get("steps"):
        try:
            _print_steps(data["steps"], args.delay)
        except (KeyError, TypeError) as exc:
            raise CliError(f"{path}: malformed step record ({exc})") from None
    else:
        _print_trace(data["trace"])
    if "answer" in data:
        print(f"answer{' (abstained)' if data.get('abstained') else ''}: {data['answer']}")
    return 0


def cmd_ask(args) -> int:
    from switchyard.graphs.app import Pipeline

    if not args.question.strip():
        raise CliError("the question is empty", EXIT_USAGE)
    pipe = Pipeline(_load_config(args))
    result = _ask_with_approval(pipe, args.question, args.where) if pipe.pauses else pipe.ask(args.question,
                                                                                             where=args.where)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return 0
    if result.short_answer or result.evidence:
        print(result.short_answer or "(no verified short answer; the evidence:)")
        print(f"\nEvidence: {result.evidence}")
    else:
        print(result.answer)
    if result.citations:
        print("\nSources:")
        for c in result.citations:
            page = f", p. {c.page}" if c.page else ""
            print(f"  [{c.n}] {c.title} — {c.source}{page}")
    if args.trace:
        data = result.to_json()  # the trace as `ask --json` and `cli.py trace` show it
        if data["steps"]:
            print("\nAgent steps:")
            _print_steps(data["steps"])
        print("\nTrace:")
        _print_trace(data["trace"])
        u = result.usage
        print(f"  total: {sum(e.ms for e in result.trace):.0f} ms, {u.llm_calls} LLM call(s), "
              f"{u.prompt_tokens} prompt + {u.completion_tokens} completion tokens")
    return 0


def _ask_with_approval(pipe, question: str, where: str | None):
    """graph.router.approve: before each action, ask on stderr/stdin whether it may run."""
    from switchyard.graphs.results import Paused

    result = pipe.start(question, where=where)
    while isinstance(result, Paused):
        result = pipe.resume(result.thread_id, _approval(result))
    return result


def _approval(paused):
    """The human's answer to one pause: [a]pprove / [e]dit arguments / [r]eject (asked again until it is one)."""
    from switchyard.errors import ApprovalError
    from switchyard.nodes.approve import Approval, checked_arguments

    p = paused.pending
    _say(f"\nstep {p.step}: {p.action}{'(' + json.dumps(p.args, ensure_ascii=False) + ')' if p.args else ''}"
         + (f"  [guard: {p.guard}]" if p.guard else "") + (f"\n  thought: {p.thought}" if p.thought else ""))
    while True:
        choice = _read("[a]pprove / [e]dit arguments / [r]eject? ").lower()
        if choice in ("a", "approve"):
            return Approval(decision="approve")
        if choice in ("e", "edit"):
            text = _read(f"new arguments as a JSON object (now {json.dumps(p.args, ensure_ascii=False)}): ")
            try:
                arguments = json.loads(text or "{}")
                if not isinstance(arguments, dict):
                    raise ApprovalError("the arguments are a JSON object, e.g. {\"query\": \"...\"}")
                checked_arguments(p.action, arguments)
            except (json.JSONDecodeError, ApprovalError) as exc:
                _say(f"  {first_line(exc)}; answer again")
                continue
            return Approval(decision="edit", arguments=arguments)
        if choice in ("r", "reject"):
            reason = _read("reason (optional; the agent sees it): ")[:200]
            return Approval(decision="reject", reason=reason or None)
        _say("  answer a, e or r")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _read(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise CliError("no answer on standard input (it ended): the paused run was left unanswered")
    return line.strip()


def cmd_graph(args) -> int:
    from switchyard.graphs import draw
    from switchyard.graphs.build import build_graph

    if args.format == "png" and not args.out:
        raise CliError("--format png needs --out FILE", EXIT_USAGE)
    text = draw.write(build_graph(_load_config(args)), args.format, args.out)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    else:
        print(f"wrote {args.out}")
    return 0


def cmd_list(args) -> int:
    stack = _stack(args)
    if not stack.store.exists():
        raise CliError(f"collection {stack.collection!r} does not exist in {stack.config.store.uri}")
    docs = stack.store.list_documents(ALL)  # the local user reads every document
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    for d in docs:
        pages = f", {d['pages']} pages" if d["pages"] else ""
        print(f"{d['doc_id']}\t{d['chunks']} chunks{pages}\t{d['title']}\t{d['source']}")
    print(f"{len(docs)} document(s) in {stack.collection!r}")
    return 0


def cmd_delete(args) -> int:
    from pathlib import Path

    stack = _stack(args)
    if not stack.store.exists():
        raise CliError(f"collection {stack.collection!r} does not exist in {stack.config.store.uri}")
    docs = stack.store.list_documents(ALL)  # the local user reads every document
    doomed: set[str] = set()
    for target in args.targets:
        matched = {d["doc_id"] for d in docs if d["doc_id"] == target}
        path = Path(target).expanduser()
        if not matched and (path.exists() or os.sep in target or "." in target):
            resolved = str(path.resolve())
            matched = {d["doc_id"] for d in docs
                       if d["source"] == resolved or d["source"].startswith(resolved.rstrip(os.sep) + os.sep)}
        if not matched:
            raise CliError(f"no indexed document matches {target!r} (see `cli.py list`); nothing deleted")
        doomed |= matched
    removed = stack.store.delete_documents(sorted(doomed), ALL)
    print(f"deleted {len(doomed)} document(s), {removed} chunk(s)")
    return 0


def _fusion_variants(args) -> dict:
    overrides: dict[str, list[str]] = {}
    for text in args.fusions:
        name, sep, setting = text.partition("=")
        if not sep or not name.strip() or "=" not in setting:
            raise CliError(f"--fusion {text!r}: expected NAME=KEY=VALUE, e.g. z=normalization=zscore", EXIT_USAGE)
        if name.strip() in ("bm25", "dense", "hybrid", "hybrid+rerank"):
            raise CliError(f"--fusion {text!r}: {name.strip()} is a built-in configuration; pick another name",
                           EXIT_USAGE)
        overrides.setdefault(name.strip(), []).append(f"retrieve.fusion.{setting}")
    from switchyard.configs.loader import load_config

    return {name: load_config(args.config, list(args.overrides) + sets).retrieve.fusion
            for name, sets in overrides.items()}


def cmd_eval_retrieval(args) -> int:
    from switchyard.retrievers.beir_eval import evaluate, evaluate_suite, format_suite_table, format_table

    config = _load_config(args)
    variants = _fusion_variants(args)
    progress = None if not args.json else False
    if len(args.datasets) == 1:
        result = evaluate(config, args.datasets[0], split=args.split, index_dir=args.index_dir, limit=args.limit,
                          progress=progress, variants=variants)
        table = format_table(result)
    else:
        result = evaluate_suite(config, args.datasets, split=args.split, index_dir=args.index_dir,
                                limit=args.limit, progress=progress, variants=variants)
        table = format_suite_table(result)
    if args.out:
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result))
    else:
        print(table)
    return 0


def cmd_fit_adapter(args) -> int:
    from switchyard.retrievers.beir_eval import fit_adapter

    meta = fit_adapter(_load_config(args), args.dataset, args.out, split=args.split, index_dir=args.index_dir,
                       epochs=args.epochs, learning_rate=args.learning_rate, negatives=args.negatives,
                       progress=None if not args.json else False)
    if args.json:
        print(json.dumps(meta))
    else:
        print(f"query adapter written to {args.out}: {meta['queries']} labelled queries of {meta['dataset']} "
              f"({meta['split']}), {meta['skipped_queries']} skipped (no relevant document indexed), "
              f"fitted in {meta['fit_s']} s\nuse it: --set retrieve.retrievers.dense.query_adapter={args.out}")
    return 0


def cmd_eval(args) -> int:
    from pathlib import Path

    from switchyard.evaluation.datasets import load_dataset

    with needs_extra("eval", "switchyard eval (plots, paired statistics)"):
        from switchyard.evaluation.report import write_report
    from switchyard.evaluation.rows import read_rows
    from switchyard.evaluation.runner import Evaluator

    if args.runs < 1 or args.workers < 1 or (args.limit is not None and args.limit < 1):
        raise CliError("--runs, --workers and --limit must be >= 1", EXIT_USAGE)
    if args.replay and not (args.llm_cache or args.vector_cache):
        raise CliError("--replay needs --llm-cache DIR (the recorded replies) or --vector-cache DIR", EXIT_USAGE)
    ray_runner = _ray_module("switchyard.evaluation.ray_runner") if args.ray else None
    if args.replay and args.llm_cache and not Path(args.llm_cache).is_dir():
        raise CliError(f"--llm-cache {args.llm_cache}: no such folder of recorded replies")
    if args.replay and args.vector_cache and not Path(args.vector_cache).is_dir():
        raise CliError(f"--vector-cache {args.vector_cache}: no such folder of recorded vectors")
    cache = [f"llm.cache_dir={args.llm_cache}"] + (["llm.replay=true"] if args.replay else []) \
        if args.llm_cache else []
    vectors = [f"embedding.vector_cache={args.vector_cache}"] + (["embedding.replay=true"] if args.replay else []) \
        if args.vector_cache else []
    args.overrides = [*args.overrides, *cache, *vectors]
    for path in args.configs:
        _load_config_file(path)  # every config is checked before any work starts
    judge_llm = _load_config_file(args.judge, cache).llm if args.judge else None
    if args.baseline and args.baseline not in {Path(p).stem for p in args.configs}:
        raise CliError(f"--baseline {args.baseline} is not one of the compared configs", EXIT_USAGE)
    out = Path(args.out)
    # a corpus built from the dataset lives beside the index, so evaluations sharing --index-dir share it too
    cache = Path(args.index_dir).parent / "cache" if args.index_dir else out / "cache"
    dataset = load_dataset(args.dataset, args.corpus, cache_dir=cache)
    evaluator = Evaluator(dataset, [Path(p) for p in args.configs], out, runs=args.runs, limit=args.limit,
                          index_dir=Path(args.index_dir) if args.index_dir else None, overrides=args.overrides,
                          allow_mixed=args.allow_mixed)
    asker = ray_runner.RayAsker(args.ray) if ray_runner else None
    signal.signal(signal.SIGTERM, _raise_terminated)  # a killed evaluation still writes the vectors it recorded
    results = evaluator.run(progress=False if args.no_progress else None, retry_errors=args.retry_errors,
                            workers=args.workers, asker=asker)
    if evaluator.unasked_changes:
        print(f"note: nothing left to ask; the results in {out} were produced by a setup that differs from this one "
              f"({'; '.join(evaluator.unasked_changes[:6])}); the report describes them with their own manifest",
              file=sys.stderr)
    names = {Path(p).stem for p in args.configs}
    config_order = {Path(p).stem: i for i, p in enumerate(args.configs)}
    question_order = {q.id: i for i, q in enumerate(evaluator.questions)}
    rows = [r.rescored() for r in read_rows(results)
            if r.config in names and r.id in question_order and r.run < args.runs]
    # the file's order depends on which worker finished first; reports do not
    rows.sort(key=lambda r: (config_order[r.config], r.run, question_order[r.id]))
    title = f"{dataset.name}: {', '.join(sorted(names))}"
    manifest = evaluator.manifest
    if judge_llm is not None:
        from switchyard.evaluation.faithfulness import JUDGEMENTS, attach_judgements
        from switchyard.evaluation.manifest import with_judge

        judge = evaluator.faithfulness_judge(judge_llm)
        rows = attach_judgements(rows, judge.judge_results(rows, out / JUDGEMENTS))
        title += f"; faithfulness judge {judge.name}"
        manifest = with_judge(manifest, judge_llm) if manifest else None
    report = write_report(rows, out, title, plot_metric=args.plot_metric, baseline=args.baseline,
                          manifest=manifest)
    print((out / "report.md").read_text())
    if evaluator.asked:
        where = f"{asker.size} Ray actor(s)" if asker else f"{args.workers} worker(s)"
        print(f"asked {evaluator.asked} question(s) in {evaluator.answering_s:.1f} s with {where} "
              f"({evaluator.asked / evaluator.answering_s:.2f} questions/s)")
    counts = asker.cache_counts if asker else evaluator.llm_cache_counts()
    if counts:
        print(f"LLM replies: {counts['replayed']} replayed from and {counts['recorded']} recorded into "
              f"{args.llm_cache or 'llm.cache_dir'}")
    counts = asker.vector_counts if asker else evaluator.vector_cache_counts()
    if counts:
        print(f"embedding vectors: {counts['replayed']} replayed from and {counts['recorded']} recorded into "
              f"{args.vector_cache or 'embedding.vector_cache'}")
    print(f"wrote {out / 'report.md'}, report.json, {results.name}, configs/ and "
          f"{len(report.get('plots', {}).get('files', []))} plots")
    return 0 if report["configs"] else EXIT_FAIL


def _load_config_file(path: str, overrides: list[str] | None = None):
    from switchyard.configs.loader import load_config

    return load_config(path, overrides or [])


def cmd_serve(args) -> int:
    from pathlib import Path

    with needs_extra("server", "switchyard serve"):
        import uvicorn

        from switchyard.service.app import create_app
        from switchyard.service.settings import ServiceSettings

    overrides = list(args.overrides) + ([f"store.uri={args.index_dir}"] if args.index_dir else [])
    try:
        settings = ServiceSettings(
            configs=tuple(args.configs or ["fixed"]), overrides=tuple(overrides), max_in_flight=args.max_in_flight,
            request_timeout_s=args.timeout, max_question_chars=args.max_question_chars,
            max_upload_files=args.max_upload_files, max_upload_bytes=int(args.max_upload_mb * 2**20),
            upload_dir=Path(args.upload_dir), warm_up=not args.no_warm_up,
            audit_log=Path(args.audit_log) if args.audit_log else None, audit_questions=args.audit_questions)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    app = create_app(settings)  # configs are loaded and checked here: a bad one is a one-line error
    print(f"switchyard: serving {', '.join(app.state.service.registry.names())} on http://{args.host}:{args.port}/"
          + (" (bearer token required)" if settings.api_token else ""), file=sys.stderr, flush=True)
    # idle connections are kept longer than clients' usual 5 s expiry, so a client never reuses one as it is dropped
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                                           timeout_keep_alive=30, timeout_graceful_shutdown=max(5, int(args.timeout))))
    server.run()
    return 0


def cmd_mcp(args) -> int:
    with needs_extra("server", "switchyard mcp"):
        from switchyard.service.mcp_server import create_mcp_server
        from switchyard.service.registry import PipelineRegistry

    overrides = list(args.overrides) + ([f"store.uri={args.index_dir}"] if args.index_dir else [])
    registry = PipelineRegistry(tuple(args.configs or ["fixed"]), tuple(overrides))  # a bad config: one line
    print(f"switchyard: MCP server on stdio, pipelines {', '.join(registry.names())}", file=sys.stderr, flush=True)
    # stdout carries the protocol alone: while serving, the SDK points fd 1 at stderr for everything else
    create_mcp_server(registry).run("stdio")
    return 0


def cmd_keys(args) -> int:
    from switchyard.service.keys import KeyStore, keys_path

    store = KeyStore(keys_path(_load_config(args).store.uri, Path(args.upload_dir)))
    if args.keys_action == "create":
        key = store.create(args.name, args.collections, write=args.write, admin=args.admin, groups=args.groups,
                           rpm=args.rpm, max_in_flight=args.max_in_flight)
        print(key)
        print(f"key {args.name!r} created in {store.path}; it is shown only now", file=sys.stderr)
    elif args.keys_action == "revoke":
        store.revoke(args.name)
        print(f"key {args.name!r} revoked", file=sys.stderr)
    elif args.json:
        print(json.dumps(store.list(), indent=2))
    else:
        for k in store.list():
            rights = "admin" if k["admin"] else ("read+write" if k["write"] else "read")
            print(f"{k['name']}\t{rights}\tcollections={','.join(k['collections']) or '*'}\t"
                  f"groups={','.join(k['groups']) or '-'}\trpm={k['rpm'] or '-'}\tin_flight={k['max_in_flight'] or '-'}")
    return 0


def cmd_config(args) -> int:
    from switchyard.configs.loader import config_to_dict

    data = config_to_dict(_load_config(args))
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(data, sort_keys=False), end="")
    return 0


COMMANDS = {"ingest": cmd_ingest, "ask": cmd_ask, "trace": cmd_trace, "graph": cmd_graph, "search": cmd_search, "list": cmd_list, "delete": cmd_delete,
            "eval-retrieval": cmd_eval_retrieval, "fit-adapter": cmd_fit_adapter, "eval": cmd_eval, "serve": cmd_serve, "mcp": cmd_mcp, "keys": cmd_keys,
            "config": cmd_config}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that `finally` blocks run."""


def _raise_terminated(signum, frame):
    raise Terminated


def _log_unexpected(exc: BaseException) -> Path | None:
    """Append the traceback of an unexpected error to the error log; its path (None if it cannot be written)."""
    cache = Path(os.environ.get("SWITCHYARD_CACHE_DIR") or Path.home() / ".cache" / "switchyard")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / "errors.log"
        with path.open("a", encoding="utf-8") as log:
            log.write(f"$ {' '.join(sys.argv)}\n{''.join(traceback.format_exception(exc))}\n")
        return path
    except OSError:
        return None


def set_process_defaults() -> None:
    """What the command line (and the server it starts) sets for its own process, and the library never does:
    offline, quiet model loading (configs/runtime_env.py; values the user set win), quiet third-party loggers, and
    OpenTelemetry's SDK from the OTEL_* variables (switchyard.otel_sdk)."""
    import logging

    from switchyard import otel_sdk
    from switchyard.configs import runtime_env

    runtime_env.apply()
    # a task that failed after an evaluation stopped on another's error (say, the same missing reply): the error
    # already reported is enough; Ray would print each such one's traceback
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a malformed PDF is reported per file, once
    otel_sdk.install()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        set_process_defaults()
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly; point stdout at /dev/null so the interpreter's final flush
        # does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Terminated:
        print("terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SwitchyardError as exc:
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        if os.environ.get("SWITCHYARD_DEBUG"):
            raise
        log = _log_unexpected(exc)
        where = f"traceback in {log}" if log else "set SWITCHYARD_DEBUG=1 for details"
        print(f"error: unexpected {type(exc).__name__}: {first_line(exc)} ({where})", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
