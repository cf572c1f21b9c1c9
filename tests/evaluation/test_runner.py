"""The runner's counts of what reply caches and vector recordings replayed and recorded."""

from switchyard.evaluation.runner import summed_counts


class TestSummedCounts:
    def test_adds_each_process_counts(self):
        counts = [{"replayed": 3, "recorded": 1}, {"replayed": 2, "recorded": 0}]
        assert summed_counts(counts) == {"replayed": 5, "recorded": 1}

    def test_a_process_without_a_cache_is_skipped(self):
        assert summed_counts([None, {"replayed": 4, "recorded": 2}]) == {"replayed": 4, "recorded": 2}

    def test_no_cache_anywhere_is_none_not_zero(self):
        assert summed_counts([None, None]) is None
        assert summed_counts([]) is None
