"""Many runs through one Pipeline at once: barrier-started threads (every request enters together), real models.

A run's answer and its own usage must be what it is when asked alone: shared models are guarded, and each run's
accounting travels with the run instead of being a difference of process-wide counters."""

import threading

import pytest

from switchyard.configs.loader import CONFIG_DIR

QUESTIONS = [
    "Who patented the knuckle coupler?",
    "What is standard gauge?",
    "What does a hump yard do?",
    "What does a three-aspect signal add?",
]


def ask_together(pipe, questions, **kwargs):
    """Ask every question from its own thread, all released at the same moment by a barrier."""
    barrier = threading.Barrier(len(questions))
    results: list = [None] * len(questions)
    errors: list = []

    def worker(i):
        barrier.wait()
        try:
            results[i] = pipe.ask(questions[i], **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported below with the question
            errors.append((questions[i], repr(exc)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a run never finished"
    assert not errors, errors
    return results


def essence(result) -> dict:
    """What must not depend on what else was in flight (timings may)."""
    return {
        "answer": result.answer,
        "abstained": result.abstained,
        "citations": [(c.n, c.doc_id) for c in result.citations],
        "queries": result.queries,
        "usage": {k: getattr(result.usage, k) for k in ("llm_calls", "prompt_tokens", "completion_tokens")},
        "per_node": [(e.node, e.llm_calls, e.prompt_tokens, e.completion_tokens) for e in result.trace],
        "steps": [(s["action"], s["args"], s["guard"], s["llm_calls"]) for s in result.steps],
        "failures": result.failures,
    }


@pytest.mark.slow
class TestConcurrentRuns:
    def test_fixed_pipeline_with_the_local_model(self, make_pipeline, local_llm):
        pipe = make_pipeline(llm=local_llm)
        sequential = [essence(pipe.ask(q)) for q in QUESTIONS]
        together = [essence(r) for r in ask_together(pipe, QUESTIONS)]
        assert together == sequential
        assert all(s["usage"]["llm_calls"] >= 1 for s in sequential)

    def test_agent_pipeline_with_the_local_model(self, make_pipeline, local_llm):
        pipe = make_pipeline("graph.router.max_steps=3", llm=local_llm, config_file=CONFIG_DIR / "agent-zeroshot.yaml")
        questions = QUESTIONS[:4]
        sequential = [essence(pipe.ask(q)) for q in questions]
        together = [essence(r) for r in ask_together(pipe, questions)]
        assert together == sequential
        assert all(s["steps"] for s in sequential)

    def test_same_question_many_times_at_temperature_above_zero(self, make_pipeline):
        """Sampling depends on the run's seed alone: the same seed gives the same answer in any schedule."""
        from switchyard.llm.client import LLM
        from switchyard.llm.llamacpp import LlamaCppBackend

        pipe = make_pipeline("llm.temperature=0.8", llm=LLM(LlamaCppBackend(), temperature=0.8, max_tokens=48))
        alone = essence(pipe.ask(QUESTIONS[0], seed=7))
        together = ask_together(pipe, [QUESTIONS[0]] * 4, seed=7)
        assert [essence(r) for r in together] == [alone] * 4


class TestConcurrentRunsWithoutLLM:
    def test_no_llm_pipeline_eight_threads(self, make_pipeline):
        pipe = make_pipeline(config_file=CONFIG_DIR / "no-llm.yaml")
        questions = QUESTIONS * 2
        sequential = [essence(pipe.ask(q)) for q in questions]
        assert [essence(r) for r in ask_together(pipe, questions)] == sequential

    def test_usage_of_overlapping_runs_is_their_own(self, make_pipeline):
        """A scripted model whose answer call waits until every run is inside it: the calls overlap for certain,
        and each run still counts exactly its own calls."""
        from tests.nodes.scripted import scripted_llm

        inside = threading.Barrier(4, timeout=60)

        def answer(_n):
            inside.wait()
            return "Eli Janney patented the knuckle coupler in 1873 [1]."

        llm, backend = scripted_llm(answer=answer)
        pipe = make_pipeline(llm=llm)
        results = ask_together(pipe, ["Who patented the knuckle coupler?"] * 4)
        for r in results:
            assert r.usage.llm_calls == 2  # its rewrite and its answer, none of the others'
            assert [e.llm_calls for e in r.trace] == [1, 0, 0, 0, 1]
        assert len(backend.calls) == 8
        assert len({r.run_id for r in results}) == 4
