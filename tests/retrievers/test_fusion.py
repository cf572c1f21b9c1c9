import pytest

from retrievers.documents import Passage
from retrievers.fusion import convex_combination, fuse, min_max, reciprocal_rank_fusion


def _p(cid: str, score: float) -> Passage:
    return Passage(chunk_id=cid, doc_id=cid, source="s", title=cid, text=cid, score=score)


def _lists():
    return {
        "bm25": [_p("a", 10), _p("b", 5), _p("c", 1)],
        "dense": [_p("b", 0.9), _p("d", 0.8), _p("a", 0.5)],
    }


class TestReciprocalRankFusion:
    def test_unweighted_matches_hand_computation(self):
        fused = reciprocal_rank_fusion(_lists(), k=60)
        assert [p.chunk_id for p in fused] == ["b", "a", "d", "c"]
        by_id = {p.chunk_id: p for p in fused}
        assert by_id["b"].score == pytest.approx(1 / 62 + 1 / 61)
        assert by_id["a"].score == pytest.approx(1 / 61 + 1 / 63)
        assert by_id["d"].score == pytest.approx(1 / 62)
        assert by_id["c"].score == pytest.approx(1 / 63)

    def test_ranks_are_one_based_and_kept_per_retriever(self):
        by_id = {p.chunk_id: p for p in reciprocal_rank_fusion(_lists())}
        assert by_id["a"].ranks == {"bm25": 1, "dense": 3}
        assert by_id["a"].scores["bm25"] == 10 and by_id["a"].scores["dense"] == 0.5
        assert by_id["d"].ranks == {"dense": 2}

    def test_weights_change_the_winner(self):
        fused = reciprocal_rank_fusion(_lists(), k=60, weights={"bm25": 2.0, "dense": 1.0})
        assert [p.chunk_id for p in fused] == ["a", "b", "c", "d"]
        assert fused[0].score == pytest.approx(2 / 61 + 1 / 63)

    def test_k_zero_is_plain_reciprocal_rank(self):
        fused = reciprocal_rank_fusion({"x": [_p("a", 1), _p("b", 0)]}, k=0)
        assert [p.score for p in fused] == [pytest.approx(1.0), pytest.approx(0.5)]

    def test_negative_k_rejected(self):
        with pytest.raises(ValueError):
            reciprocal_rank_fusion(_lists(), k=-1)

    def test_inputs_not_mutated(self):
        lists = _lists()
        reciprocal_rank_fusion(lists)
        assert lists["bm25"][0].scores == {} and lists["bm25"][0].score == 10


class TestConvexCombination:
    def test_equal_weights_match_hand_computation(self):
        fused = convex_combination(_lists(), weights={"bm25": 0.5, "dense": 0.5})
        assert [p.chunk_id for p in fused] == ["b", "a", "d", "c"]
        by_id = {p.chunk_id: p.score for p in fused}
        assert by_id["b"] == pytest.approx(0.5 * 4 / 9 + 0.5 * 1.0)
        assert by_id["a"] == pytest.approx(0.5)
        assert by_id["d"] == pytest.approx(0.5 * 0.75)
        assert by_id["c"] == pytest.approx(0.0)

    def test_weights_are_normalised(self):
        fused = convex_combination(_lists(), weights={"bm25": 3, "dense": 1})
        by_id = {p.chunk_id: p.score for p in fused}
        assert [p.chunk_id for p in fused] == ["a", "b", "d", "c"]
        assert by_id["a"] == pytest.approx(0.75)
        assert by_id["b"] == pytest.approx((3 * 4 / 9 + 1) / 4)

    def test_zero_weight_ignores_a_retriever(self):
        fused = convex_combination(_lists(), weights={"bm25": 0, "dense": 1})
        assert [p.chunk_id for p in fused][:2] == ["b", "d"]

    def test_all_zero_weights_rejected(self):
        with pytest.raises(ValueError):
            convex_combination(_lists(), weights={"bm25": 0, "dense": 0})


class TestMinMax:
    def test_scales_to_unit_interval(self):
        assert min_max([2, 4, 6]) == [0.0, 0.5, 1.0]

    def test_constant_and_empty(self):
        assert min_max([3, 3]) == [1.0, 1.0]
        assert min_max([]) == []


def test_fuse_dispatch_and_unknown_method():
    assert [p.chunk_id for p in fuse(_lists(), "rrf")] == ["b", "a", "d", "c"]
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse(_lists(), "max")
