"""Determinism at temperature 0: does a question get the same answer alone, after other questions in any order, and
from 8 threads at once? And what does the guarantee cost?

    .venv/bin/python bench/determinism.py --questions 4 --max-tokens 96
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
of the longest common prompt prefix of the previous call: LlamaCppBackend.fresh_context = False).

Prints, per level, how many replies/answers differ from the alone ones, and the latency: mean ms per LLM call in
the sequences and the mean total ms per question asked in order.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from common import ROOT, SAMPLE_QUESTIONS

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


def logit_level() -> None:
    """The last prompt token's logits, the whole prompt evaluated at once vs in two parts (what prefix reuse does:
    the cached part, then the rest), and with 1 vs 2 threads."""
    import numpy as np
    from llama_cpp import Llama

    from switchyard.llm.llamacpp import packaged_gguf

    def model(n_threads: int = 2):
        return Llama(model_path=str(packaged_gguf()), n_ctx=2048, n_threads=n_threads, logits_all=True, verbose=False)

    m = model()
    prompt = (
        m.tokenize(
            m.tokenizer_.hf_tokenizer.apply_chat_template(LONG, tokenize=False, add_generation_prompt=True).encode(),
            special=True,
        )
        if hasattr(m.tokenizer_, "hf_tokenizer")
        else None
    )
    if prompt is None:
        from llama_cpp.llama_chat_format import format_chatml

        prompt = m.tokenize(format_chatml(LONG).prompt.encode(), special=True)

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
    print(
        f"logits of the last of {len(prompt)} prompt tokens, max |difference| from the whole prompt at once "
        f"({last_logits.ms:.0f} ms to evaluate):"
    )
    for left in (1, 2, 10, len(prompt) // 2):
        part = last_logits(m, len(prompt) - left)
        print(
            f"  prefix cached, last {left} token(s) evaluated: {np.abs(part - whole).max():.4f} "
            f"(greedy token {'same' if part.argmax() == whole.argmax() else 'DIFFERENT'}; {last_logits.ms:.0f} ms)"
        )
    print(f"  n_threads=1 instead of 2: {np.abs(last_logits(model(1)) - whole).max():.4f}")


def call_level(max_tokens: int, rounds: int) -> None:
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
    for fresh in (False, True):
        name = "fresh context (fix)" if fresh else "prefix reuse (before)"
        print(
            f"  {name}: {differ[fresh]} of {runs} replies differ from alone; mean "
            f"{sum(times[fresh]) / len(times[fresh]):.0f} ms per call ({len(times[fresh])} calls)"
        )


def pipeline_level(n: int, max_tokens: int) -> None:
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
    for name, answers, expected in (
        ("in order", in_order, alone),
        ("reverse order", reverse, alone),
        ("8 threads, one barrier", threads, [alone[i % n] for i in range(8)]),
    ):
        differ = sum(a != b for a, b in zip(answers, expected))
        print(f"  {name}: {differ} of {len(answers)} answers differ from alone")
    print(f"  mean total per question (in order and reverse): {mean_ms:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=4, help="how many SAMPLE_QUESTIONS (at most 8)")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--call-max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1, help="LLM calls: how many times the three sequences")
    parser.add_argument(
        "--prefix-reuse", action="store_true", help="pipeline: llama.cpp's prompt-prefix reuse (before the fix)"
    )
    parser.add_argument("--skip-pipeline", action="store_true")
    args = parser.parse_args()
    logit_level()
    call_level(args.call_max_tokens, args.rounds)
    LlamaCppBackend.fresh_context = not args.prefix_reuse
    if not args.skip_pipeline:
        print(f"fresh context per call: {LlamaCppBackend.fresh_context}")
        pipeline_level(min(args.questions, len(SAMPLE_QUESTIONS)), args.max_tokens)


if __name__ == "__main__":
    main()
