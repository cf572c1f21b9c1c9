"""Asking and looking: ask (with a human approving each action when the pipeline pauses), search, trace (a saved
run replayed step by step), graph."""

from __future__ import annotations

import json
import sys

from switchyard.commands.chat import read_history
from switchyard.commands.common import load_config
from switchyard.errors import InputError, UsageError, first_line, program


def cmd_ask(args) -> int:
    from switchyard.graphs.pipeline import Pipeline

    if not args.question.strip():
        raise UsageError("the question is empty")
    history = read_history(args.history) if args.history else None
    pipe = Pipeline(load_config(args))
    if history and pipe.pauses:
        raise UsageError("--history: a pipeline that pauses for approval answers one question at a time")
    result = (
        _ask_with_approval(pipe, args.question, args.where)
        if pipe.pauses
        else pipe.ask(args.question, where=args.where, history=history)
    )
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return 0
    if result.standalone:
        print(f"(searched: {result.standalone})", file=sys.stderr)
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
        data = result.to_json()  # the trace as `ask --json` and `switchyard trace` show it
        if data["steps"]:
            print("\nAgent steps:")
            _print_steps(data["steps"])
        print("\nTrace:")
        _print_trace(data["trace"])
        u = result.usage
        print(
            f"  total: {sum(e.ms for e in result.trace):.0f} ms, {u.llm_calls} LLM call(s), "
            f"{u.prompt_tokens} prompt + {u.completion_tokens} completion tokens"
        )
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
    _say(
        f"\nstep {p.step}: {p.action}{'(' + json.dumps(p.args, ensure_ascii=False) + ')' if p.args else ''}"
        + (f"  [guard: {p.guard}]" if p.guard else "")
        + (f"\n  thought: {p.thought}" if p.thought else "")
    )
    while True:
        choice = _read("[a]pprove / [e]dit arguments / [r]eject? ").lower()
        if choice in ("a", "approve"):
            return Approval(decision="approve")
        if choice in ("e", "edit"):
            text = _read(f"new arguments as a JSON object (now {json.dumps(p.args, ensure_ascii=False)}): ")
            try:
                arguments = json.loads(text or "{}")
                if not isinstance(arguments, dict):
                    raise ApprovalError('the arguments are a JSON object, e.g. {"query": "..."}')
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
        raise InputError("no answer on standard input (it ended): the paused run was left unanswered")
    return line.strip()


def cmd_search(args) -> int:
    if not args.query.strip():
        raise UsageError("the query is empty")
    if args.k is not None and args.k < 1:
        raise UsageError("--k must be >= 1")
    from switchyard.graphs.pipeline import Pipeline

    history = read_history(args.history) if args.history else None
    pipe = Pipeline(load_config(args))
    stack = pipe.resources.stack
    result = pipe.search(
        args.query, where=args.where, top_k=args.k, history=history
    )  # what `ask` retrieves in its first round
    if args.json:
        from switchyard.nodes.search import search_json

        print(json.dumps(search_json(args.query, result, stack), indent=2))
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


def _format_scores(p) -> str:
    parts = []
    for name, value in p.scores.items():
        rank = p.ranks.get(name)
        parts.append(f"{name} {value:.4f}" + (f" (#{rank})" if rank else ""))
    return ", ".join(parts)


def cmd_trace(args) -> int:
    from pathlib import Path

    path = Path(args.file)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"trace file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON trace ({exc})") from None
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict) or not isinstance(data.get("steps", data.get("trace")), list):
        raise InputError(f"{path}: expected the JSON printed by `{program()} ask --json` (with 'steps' or 'trace')")
    if data.get("question"):
        print(f"question: {data['question']}")
    if data.get("steps"):
        try:
            _print_steps(data["steps"], args.delay)
        except (KeyError, TypeError) as exc:
            raise InputError(f"{path}: malformed step record ({exc})") from None
    else:
        _print_trace(data["trace"])
    if "answer" in data:
        print(f"answer{' (abstained)' if data.get('abstained') else ''}: {data['answer']}")
    return 0


def _print_trace(trace: list[dict]) -> None:
    for i, entry in enumerate(trace, start=1):
        llm = (
            f", {entry['llm_calls']} LLM call(s), {entry['prompt_tokens']}+{entry['completion_tokens']} tokens"
            if entry.get("llm_calls")
            else ""
        )
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
        cost = (
            f"router {s.get('router_ms', 0):.0f} ms, {s.get('llm_calls', 0)} LLM call(s), "
            f"{s.get('prompt_tokens', 0)}+{s.get('completion_tokens', 0)} tokens; action {s.get('action_ms', 0):.0f} ms"
        )
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


def cmd_graph(args) -> int:
    from switchyard.graphs import draw
    from switchyard.graphs.build import build_graph

    if args.format == "png" and not args.out:
        raise UsageError("--format png needs --out FILE")
    text = draw.write(build_graph(load_config(args)), args.format, args.out)
    if text is not None:
        print(text, end="" if text.endswith("\n") else "\n")
    else:
        print(f"wrote {args.out}")
    return 0
