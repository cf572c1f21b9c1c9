"""Per-run accounting scopes: nested meters, isolation between threads, the run's seed and token sink."""
import threading

from nodes.run_context import (RunContext, answer_token_sink, metered, record_call, record_parse_fallback,
                               run_seed)


class TestMetered:
    def test_nested_scopes_each_count_what_happened_inside(self):
        with metered() as outer:
            record_call(10, 2, 5.0)
            with metered() as inner:
                record_call(3, 1, 1.0)
                record_parse_fallback()
        assert inner.as_dict() == {"llm_calls": 1, "prompt_tokens": 3, "completion_tokens": 1, "llm_ms": 1.0,
                                   "parse_fallbacks": 1}
        assert (outer.llm_calls, outer.prompt_tokens, outer.parse_fallbacks) == (2, 13, 1)

    def test_outside_any_scope_nothing_is_counted_and_nothing_fails(self):
        record_call(1, 1, 1.0)
        assert run_seed() is None and answer_token_sink() is None

    def test_threads_never_see_each_others_meters(self):
        barrier = threading.Barrier(8)
        counted = {}

        def run(i):
            with metered(RunContext(seed=i)) as usage:
                barrier.wait()  # every thread is inside its scope at once
                for _ in range(i + 1):
                    record_call(1, 1, 0.0)
                barrier.wait()
                counted[i] = (usage.llm_calls, run_seed())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert counted == {i: (i + 1, i) for i in range(8)}

    def test_context_sets_seed_and_token_sink_for_the_block_only(self):
        sink = [].append
        with metered(RunContext(seed=42), token_sink=sink):
            assert run_seed() == 42 and answer_token_sink() is sink
            with metered():  # an inner scope keeps the run's settings
                assert run_seed() == 42 and answer_token_sink() is sink
        assert run_seed() is None and answer_token_sink() is None
