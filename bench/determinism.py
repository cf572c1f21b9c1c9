"""Determinism at temperature 0: does a question get the same answer alone, after other questions in any order, and
from 8 threads at once? And what does the guarantee cost?

    .venv/bin/python bench/determinism.py --questions 4 --max-tokens 96 --both-ways      # the docs' result
    .venv/bin/python bench/determinism.py --questions 4 --max-tokens 96                  # pipeline: with the fix
    .venv/bin/python bench/determinism.py --questions 4 --max-tokens 96 --prefix-reuse   # pipeline: before the fix

Two levels, both with the default local model (the packaged SmolLM2 GGUF) at temperature 0:

- Logits: the last prompt token's logits with the whole prompt evaluated at once, and in two parts as prefix reuse
  does (cached prefix, then the rest); and with 1 vs 2 threads.
- LLM calls: one chat request (~200 tokens) sent to a freshly loaded model ("alone"), then again after requests of
  other lengths that share its prefix (two orders) and right after itself, with prefix reuse (before the fix) and
  with a fresh context per call (the fix), alternating in one process; and the request with llm.n_threads=1 and 2.
- Pipeline: the default fixed config (configs/fixed.yaml) over the bundled sample corpus (samples/corpus, ingested
  into a temporary index). Each of --questions SAMPLE_QUESTIONS is asked alone (a freshly loaded model per
  question), then all of them in order, in reverse order, and from 8 threads released by one barrier (question
  i % N in thread i) through one Pipeline.

`--prefix-reuse` runs the pipeline level with llama-cpp-python's behaviour before the fix (a call reuses the KV cache
of the longest common prompt prefix of the previous call: LlamaCppBackend.fresh_context = False); `--both-ways` runs
it with the fix, then before it (each way with its own alone answers), in one run.

Prints, per level, how many replies/answers differ from the alone ones, and the latency: mean ms per LLM call in
the sequences and the mean total ms per question asked in order. Records the same figures in
bench/results/determinism.json (bench/results.py; `--result NAME` for another name): under `logits` the prompt's
length and, per split, the max |difference| of the last token's logits, whether the greedy token stayed and the ms
to evaluate what was not cached; under `calls` the replies differing and mean ms per call of both ways; under
`pipeline` (absent with --skip-pipeline) one entry per way run (`fresh_context`, `prefix_reuse`); the load average
at the start and the end.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import results as result_files
from common import ROOT, SAMPLE_QUESTIONS, load_average

from switchyard.configs.loader import load_config
from switchyard.graphs.pipeline import Pipeline
from switchyard.llm.client import LLM
from switchyard.llm.factory import build_llm
from switchyard.llm.llamacpp import LlamaCppBackend
from switchyard.nodes.resources import SharedModels
from tests.together import run_together

SYSTEM = "You answer questions about railways from the passages given, in one sentence."
PASSAGE = "The knuckle coupler was patented by Eli Janney in 1873 and couples cars automatically. "


def request(question: str, passages: int) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PASSAGE * passages + f"\nQuestion: {question}"},
    ]


# ~200 prompt tokens; the others share its prefix and differ in length
TARGET = request("Who patented the knuckle coupler?", 8)
OTHERS = [
    request("What is a coupler?", 3),
    request("When was it patented?", 12),
    request("Who patented the knuckle coupler? Answer briefly.", 8),
]
LONG = request("Who patented the knuckle coupler?", 30)  # ~700 tokens, for the logits (216 tokens showed no change)
WAYS = {True: "fresh_context", False: "prefix_reuse"}  # LlamaCppBackend.fresh_context -> the figures' key


def logit_level() -> dict:
    """The last prompt token's logits, the whole prompt evaluated at once vs in two parts (what prefix reuse does:
    the cached part, then the rest), and with 1 vs 2 threads."""
    import numpy as np
    from llama_cpp import Llama

    from switchyard.llm.llamacpp import packaged_gguf

    def model(n_threads: int = 2):
        return Llama(model_path=str(packaged_gguf()), n_ctx=2048, n_threads=n_threads, logits_all=True, verbose=False)

    m = model()

    def tokens(messages: list[dict]) -> list[int]:
        if hasattr(m.tokenizer_, "hf_tokenizer"):
            text = m.tokenizer_.hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return m.tokenize(text.encode(), special=True)
        from llama_cpp.llama_chat_format import format_chatml

        return m.tokenize(format_chatml(messages).prompt.encode(), special=True)

    prompt = tokens(LONG)

    def last_logits(m, split: int | None = None):
        m.reset()
        t0 = time.perf_counter()
        m.eval(prompt[:split] if split else prompt)
        if split:
            t0 = time.perf_counter()
            m.eval(prompt[split:])
        last_logits.ms = (time.perf_counter() - t0) * 1000  # evaluating what was not cached
        return np.array(m.scores[len(prompt) - 1])

    whole = last_logits(m)
    figures = {
        "prompt_tokens": len(prompt),
        "target_tokens": len(tokens(TARGET)),  # the LLM calls' request
        "whole_ms": round(last_logits.ms),
        "splits": [],
    }
    print(
        f"logits of the last of {len(prompt)} prompt tokens, max |difference| from the whole prompt at once "
        f"({last_logits.ms:.0f} ms to evaluate):"
    )
    for left in (1, 2, 10, len(prompt) // 2):
        part = last_logits(m, len(prompt) - left)
        diff, same = float(np.abs(part - whole).max()), bool(part.argmax() == whole.argmax())
        figures["splits"].append(
            {"evaluated": left, "max_abs_diff": round(diff, 4), "greedy_same": same, "ms": round(last_logits.ms)}
        )
        print(
            f"  prefix cached, last {left} token(s) evaluated: {diff:.4f} "
            f"(greedy token {'same' if same else 'DIFFERENT'}; {last_logits.ms:.0f} ms)"
        )
    threads = float(np.abs(last_logits(model(1)) - whole).max())
    figures["threads_1_vs_2_max_abs_diff"] = round(threads, 4)
    print(f"  n_threads=1 instead of 2: {threads:.4f}")
    return figures


def call_level(max_tokens: int, rounds: int) -> dict:
    """Both ways in one process, alternating, so that the latency compares under the same load."""

    def llm(n_threads: int = 2) -> LLM:
        return LLM(LlamaCppBackend(n_threads=n_threads), max_tokens=max_tokens)

    alone = llm().generate(TARGET)
    one_thread = llm(n_threads=1).generate(TARGET)
    print(f"LLM calls: n_threads=1 vs 2, the same request alone: {'same' if one_thread == alone else 'DIFFERENT'}")
    models = {False: llm(), True: llm()}
    times: dict[bool, list[float]] = {False: [], True: []}
    differ = {False: 0, True: 0}
    runs = 0
    for _ in range(rounds):
        for before in (OTHERS, OTHERS[::-1], [TARGET]):
            runs += 1
            for fresh, model in models.items():
                LlamaCppBackend.fresh_context = fresh
                for messages in [*before, TARGET]:
                    t0 = time.perf_counter()
                    text = model.generate(messages)
                    times[fresh].append((time.perf_counter() - t0) * 1000)
                differ[fresh] += text != alone
    LlamaCppBackend.fresh_context = True
    print(
        f"LLM calls (max_tokens={max_tokens}): the same request after others of other lengths (2 orders) and "
        f"right after itself, {runs} times:"
    )
    figures = {"max_tokens": max_tokens, "runs": runs, "threads_1_vs_2_same": one_thread == alone, "ways": {}}
    for fresh in (False, True):
        name = "fresh context (fix)" if fresh else "prefix reuse (before)"
        mean = sum(times[fresh]) / len(times[fresh])
        figures["ways"][WAYS[fresh]] = {"differ": differ[fresh], "calls": len(times[fresh]), "mean_ms": round(mean)}
        print(
            f"  {name}: {differ[fresh]} of {runs} replies differ from alone; mean "
            f"{mean:.0f} ms per call ({len(times[fresh])} calls)"
        )
    return figures


def pipeline_level(n: int, max_tokens: int) -> dict:
    questions = SAMPLE_QUESTIONS[:n]
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(
            ROOT / "configs" / "fixed.yaml", [f"store.uri={tmp}/index", f"llm.max_tokens={max_tokens}"]
        )
        shared = Pipeline(config)
        shared.resources.stack.ingestor(progress=False).run([ROOT / "samples" / "corpus"])
        embedder = shared.resources.embedder

        def fresh_pipeline() -> Pipeline:  # the same index and embedder, a freshly loaded model
            models = SharedModels()
            models.provide(config.embedding, embedder)
            models.provide(config.llm, build_llm(config.llm))
            return Pipeline(config, models)

        alone = [fresh_pipeline().ask(q).answer for q in questions]
        totals: list[float] = []

        def ask(q: str) -> str:
            result = shared.ask(q)
            totals.append(result.usage.total_ms)
            return result.answer

        in_order = [ask(q) for q in questions]
        reverse = [ask(q) for q in questions[::-1]][::-1]
        mean_ms = sum(totals) / len(totals)
        threads = run_together(8, lambda i: shared.ask(questions[i % n]).answer, timeout=900)
    print(f"pipeline: {n} questions, fixed config, llm.max_tokens={max_tokens}")
    figures: dict = {"questions": n, "max_tokens": max_tokens}
    for key, name, answers, expected in (
        ("in_order", "in order", in_order, alone),
        ("reverse", "reverse order", reverse, alone),
        ("threads", "8 threads, one barrier", threads, [alone[i % n] for i in range(8)]),
    ):
        differ = sum(a != b for a, b in zip(answers, expected))
        figures[key] = {"differ": differ, "answers": len(answers)}
        print(f"  {name}: {differ} of {len(answers)} answers differ from alone")
    figures["mean_total_ms"] = round(mean_ms)
    print(f"  mean total per question (in order and reverse): {mean_ms:.0f} ms")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=4, help="how many SAMPLE_QUESTIONS (at most 8)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--call-max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1, help="LLM calls: how many times the three sequences")
    ways = parser.add_mutually_exclusive_group()
    ways.add_argument(
        "--prefix-reuse", action="store_true", help="pipeline: llama.cpp's prompt-prefix reuse (before the fix)"
    )
    ways.add_argument("--both-ways", action="store_true", help="pipeline: with the fix, then before it")
    parser.add_argument("--skip-pipeline", action="store_true")
    parser.add_argument("--result", default="determinism", help="the result file: bench/results/NAME.json")
    args = parser.parse_args()
    import llama_cpp

    from switchyard.llm.llamacpp import packaged_gguf

    load_start = load_average()
    figures: dict = {"logits": logit_level(), "calls": call_level(args.call_max_tokens, args.rounds)}
    fresh_ways = [True, False] if args.both_ways else [not args.prefix_reuse]
    if not args.skip_pipeline:
        figures["pipeline"] = {}
        n = min(args.questions, len(SAMPLE_QUESTIONS))
        for fresh in fresh_ways:
            LlamaCppBackend.fresh_context = fresh
            print(f"fresh context per call: {LlamaCppBackend.fresh_context}")
            figures["pipeline"][WAYS[fresh]] = pipeline_level(n, args.max_tokens)
    figures["load_average"] = {"start": load_start, "end": load_average()}
    config = {
        "questions": args.questions,
        "max_tokens": args.max_tokens,
        "call_max_tokens": args.call_max_tokens,
        "rounds": args.rounds,
        "pipeline": None if args.skip_pipeline else [WAYS[f] for f in fresh_ways],
        "model": packaged_gguf().name,
        "llama_cpp": llama_cpp.__version__,
    }
    print(f"recorded {result_files.record(args.result, figures, config)}")


if __name__ == "__main__":
    main()
