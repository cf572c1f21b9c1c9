"""Per-run accounting: nested meters on a run's context, isolation between runs in threads, the run's seed."""

import threading

from switchyard.llm.client import LLM
from switchyard.run_context import RunContext
from tests.scripted_backend import ScriptedBackend


class TestMetered:
    def test_nested_scopes_each_count_what_happened_inside(self):
        run = RunContext()
        with run.metered() as outer:
            run.record_call(10, 2, 5.0)
            with run.metered() as inner:
                run.record_call(3, 1, 1.0)
                run.record_parse_fallback()
        assert inner.as_dict() == {
            "llm_calls": 1,
            "prompt_tokens": 3,
            "completion_tokens": 1,
            "llm_ms": 1.0,
            "parse_fallbacks": 1,
        }
        assert (outer.llm_calls, outer.prompt_tokens, outer.parse_fallbacks) == (2, 13, 1)

    def test_replayed_calls_are_counted_apart_and_left_out_of_the_records(self):
        run = RunContext()
        with run.metered() as usage:
            run.record_call(5, 1, 0.2, cached=True)
            run.record_call(7, 2, 900.0)
        assert (usage.llm_calls, usage.cached_calls) == (2, 1)
        assert "cached_calls" not in usage.as_dict()  # step records stay as they were

    def test_outside_any_scope_nothing_is_counted_and_nothing_fails(self):
        run = RunContext()
        run.record_call(1, 1, 1.0)
        assert run.meters == [] and run.seed is None
        llm = LLM(ScriptedBackend(["ok"]))
        assert llm.generate([{"role": "user", "content": "hi"}]) == "ok"  # no run: nothing to count into

    def test_threads_never_see_each_others_meters(self):
        barrier = threading.Barrier(8)
        counted = {}
        seeds: dict[int, list] = {}

        def reply(messages, schema):
            return "ok"

        backend = ScriptedBackend(reply)
        real_chat = backend.chat

        def chat(messages, **kwargs):  # record the seed each call was made with, per thread
            seeds.setdefault(int(messages[0]["content"]), []).append(kwargs["seed"])
            return real_chat(messages, **kwargs)

        backend.chat = chat
        llm = LLM(backend)

        def run(i):
            context = RunContext(seed=i)
            with context.metered() as usage:
                barrier.wait()  # every thread is inside its scope at once
                for _ in range(i + 1):
                    llm.generate([{"role": "user", "content": str(i)}], run=context)
                barrier.wait()
                counted[i] = usage.llm_calls

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert counted == {i: i + 1 for i in range(8)}
        assert seeds == {i: [i] * (i + 1) for i in range(8)}

    def test_a_cancelled_run_makes_no_further_call(self):
        import pytest

        from switchyard.errors import RunCancelled

        backend = ScriptedBackend(["ok"])
        run = RunContext()
        run.cancelled.set()
        with pytest.raises(RunCancelled):
            LLM(backend).generate([{"role": "user", "content": "hi"}], run=run)
        assert backend.calls == []
