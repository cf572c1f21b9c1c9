import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import ConfigError
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.fusion import (
    adaptive_weights,
    convex_combination,
    dbsf,
    fuse,
    max_scaled,
    min_max,
    reciprocal_rank_fusion,
    top_confidence,
    winner_margin,
    z_score,
)


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
    # the allowed methods and normalizations are checked once, by the config schema
    with pytest.raises(ConfigError, match="retrieve.fusion.method: Input should be 'rrf' or 'convex'"):
        load_config(None, ["retrieve.fusion.method=max"])
    with pytest.raises(ConfigError, match="retrieve.fusion.normalization: Input should be"):
        load_config(None, ["retrieve.fusion.normalization=rank"])


# Hand computation for _lists():
#   bm25  [10, 5, 1]:     mean 16/3 = 5.3333, population sd sqrt(122/9) = 3.6818
#   dense [0.9, 0.8, 0.5]: mean 0.7333,       population sd sqrt(0.26/9) = 0.16997
class TestZScore:
    def test_values(self):
        assert z_score([10, 5, 1]) == pytest.approx([1.2675, -0.0905, -1.1770], abs=1e-4)
        assert z_score([3, 1]) == [1.0, -1.0]

    def test_constant_and_empty(self):
        assert z_score([2, 2, 2]) == [0.0, 0.0, 0.0]
        assert z_score([]) == []

    def test_fusion_matches_hand_computation(self):
        fused = convex_combination(_lists(), weights={"bm25": 0.5, "dense": 0.5}, normalization="zscore")
        by_id = {p.chunk_id: p.score for p in fused}
        # dense z: b 0.9806, d 0.3922, a -1.3728; a passage a list missed gets that list's lowest z
        assert by_id["a"] == pytest.approx((1.2675 - 1.3728) / 2, abs=1e-4)
        assert by_id["b"] == pytest.approx((-0.0905 + 0.9806) / 2, abs=1e-4)
        assert by_id["c"] == pytest.approx((-1.1770 - 1.3728) / 2, abs=1e-4)
        assert by_id["d"] == pytest.approx((-1.1770 + 0.3922) / 2, abs=1e-4)
        assert [p.chunk_id for p in fused] == ["b", "a", "d", "c"]


class TestMaxScaled:
    def test_values(self):
        assert max_scaled([8, 4, 2]) == [1.0, 0.5, 0.25]
        assert max_scaled([0, 0]) == [1.0, 1.0] and max_scaled([]) == []

    def test_flat_list_does_not_outweigh_a_peaked_one(self):
        # dense is nearly flat: min-max stretches its tiny differences over [0, 1] and they decide; scaled by its
        # best score it stays flat (0.998..1) and bm25's clear winner comes first
        lists = {
            "bm25": [_p("a", 20), _p("b", 2), _p("c", 1.5), _p("e", 1)],
            "dense": [_p("b", 0.501), _p("c", 0.5005), _p("e", 0.5002), _p("a", 0.5)],
        }
        assert convex_combination(lists, normalization="minmax")[0].chunk_id == "b"
        fused = convex_combination(lists, weights={"bm25": 0.5, "dense": 0.5}, normalization="max")
        assert fused[0].chunk_id == "a"
        assert fused[0].score == pytest.approx((1.0 + 0.5 / 0.501) / 2)
        # a passage a list missed gets that list's lowest scaled score
        assert convex_combination({"bm25": [_p("a", 4), _p("b", 2)], "dense": [_p("a", 0.5)]}, normalization="max")[
            1
        ].score == pytest.approx((0.5 + 1.0) / 2)


class TestDbsf:
    def test_values_between_mean_plus_minus_three_sd(self):
        # (s - (mean - 3 sd)) / (6 sd): 6 sd = 22.091, mean - 3 sd = -5.712
        assert dbsf([10, 5, 1]) == pytest.approx([0.7112, 0.4849, 0.3038], abs=1e-4)

    def test_outlier_is_clipped_and_does_not_squash_the_rest(self):
        # one 100 among sixteen 0s: z(100) = 4 -> clipped to 1; z(0) = -0.25 -> (3 - 0.25) / 6
        scaled = dbsf([100.0] + [0.0] * 16)
        assert scaled[0] == 1.0
        assert scaled[1] == pytest.approx(2.75 / 6)

    def test_constant_and_empty(self):
        assert dbsf([4, 4]) == [0.5, 0.5]
        assert dbsf([]) == []

    def test_fusion_matches_hand_computation(self):
        fused = fuse(_lists(), "convex", {"bm25": 0.5, "dense": 0.5}, normalization="dbsf")
        by_id = {p.chunk_id: p.score for p in fused}
        # dense dbsf: b 0.6634, d 0.5654, a 0.2712
        assert by_id["a"] == pytest.approx((0.7112 + 0.2712) / 2, abs=1e-4)
        assert by_id["b"] == pytest.approx((0.4849 + 0.6634) / 2, abs=1e-4)
        assert by_id["c"] == pytest.approx((0.3038 + 0.2712) / 2, abs=1e-4)
        assert by_id["d"] == pytest.approx((0.3038 + 0.5654) / 2, abs=1e-4)
        assert [p.chunk_id for p in fused] == ["b", "a", "d", "c"]


class TestAdaptiveWeights:
    def test_top_confidence(self):
        assert top_confidence([10, 5, 1]) == pytest.approx(1.2675, abs=1e-4)
        assert top_confidence([0.9, 0.8, 0.5]) == pytest.approx(0.9806, abs=1e-4)
        assert top_confidence([3, 3, 3]) == 0.0 and top_confidence([7]) == 0.0

    def test_weights_follow_the_list_whose_best_stands_out(self):
        w = adaptive_weights(_lists(), {"bm25": 0.5, "dense": 0.5}, power=1, depth=100)
        # raw 0.5 * 1.2675 and 0.5 * 0.9806, rescaled to the static sum 1
        assert w["bm25"] == pytest.approx(1.2675 / (1.2675 + 0.9806), abs=1e-4)
        assert w["dense"] == pytest.approx(0.9806 / (1.2675 + 0.9806), abs=1e-4)
        w2 = adaptive_weights(_lists(), {"bm25": 0.5, "dense": 0.5}, power=2, depth=100)
        assert w2["bm25"] == pytest.approx(1.2675**2 / (1.2675**2 + 0.9806**2), abs=1e-4)

    def test_power_zero_and_flat_lists_keep_static_weights(self):
        static = {"bm25": 0.55, "dense": 0.45}
        assert adaptive_weights(_lists(), static, power=0, depth=100) == static
        flat = {"bm25": [_p("a", 1), _p("b", 1)], "dense": [_p("b", 0.5), _p("a", 0.5)]}
        assert adaptive_weights(flat, static, power=1, depth=100) == static

    def test_depth_limits_the_scores_looked_at(self):
        # within the first two scores [10, 5] the best stands out by exactly one sd
        lists = {"bm25": [_p("a", 10), _p("b", 5), _p("c", 1)], "dense": [_p("a", 0.9), _p("b", 0.7)]}
        w = adaptive_weights(lists, {"bm25": 1, "dense": 3}, power=1, depth=2)
        assert w == pytest.approx({"bm25": 1.0, "dense": 3.0})

    def test_fuse_uses_the_adaptive_weights(self):
        w = adaptive_weights(_lists(), {"bm25": 0.5, "dense": 0.5}, power=1, depth=100)
        fused = fuse(_lists(), "convex", {"bm25": 0.5, "dense": 0.5}, adaptive_power=1)
        by_id = {p.chunk_id: p.score for p in fused}
        assert by_id["b"] == pytest.approx(w["bm25"] * 4 / 9 + w["dense"] * 1.0)
        assert by_id["a"] == pytest.approx(w["bm25"] * 1.0)


class TestMarginWeights:
    """adaptive_signal margin: w_r * (0.1 + (s_1 - mean(s_2..s_k+1)) / sd) ** power, rescaled to the static sum."""

    def test_winner_margin_is_the_gap_to_the_runners_up_in_sd(self):
        scores = [10.0, 4.0, 2.0, 1.0, 1.0]
        sd = (sum((s - 3.6) ** 2 for s in scores) / 5) ** 0.5
        assert winner_margin(scores, k=1) == pytest.approx((10 - 4) / sd)
        assert winner_margin(scores, k=3) == pytest.approx((10 - (4 + 2 + 1) / 3) / sd)
        assert winner_margin([3.0, 3.0, 3.0], k=1) == 0.0 and winner_margin([1.0], k=1) == 0.0

    def test_the_list_whose_winner_stands_clear_gets_the_weight(self):
        # bm25's first three are level (a natural question's common words); dense's first stands clear
        lists = {
            "bm25": [_p("a", 9.0), _p("c", 8.9), _p("d", 8.8), _p("b", 1.0)],
            "dense": [_p("b", 0.9), _p("a", 0.5), _p("c", 0.45), _p("d", 0.4)],
        }
        w = adaptive_weights(lists, {"bm25": 0.5, "dense": 0.5}, power=1, depth=100, signal="margin", k=2)
        mb = 0.1 + winner_margin([9.0, 8.9, 8.8, 1.0], 2)
        md = 0.1 + winner_margin([0.9, 0.5, 0.45, 0.4], 2)
        assert w["bm25"] == pytest.approx(mb / (mb + md)) and w["dense"] == pytest.approx(md / (mb + md))
        assert w["dense"] > 0.8
        static = fuse(lists, "convex", {"bm25": 0.5, "dense": 0.5}, normalization="zscore")
        by_margin = fuse(
            lists,
            "convex",
            {"bm25": 0.5, "dense": 0.5},
            normalization="zscore",
            adaptive_power=1,
            adaptive_signal="margin",
            adaptive_k=2,
        )
        assert static[0].chunk_id == "a" and by_margin[0].chunk_id == "b"

    def test_the_config_carries_the_signal_to_the_hybrid_retriever(self):
        config = load_config(None, ["retrieve.fusion.adaptive_signal=margin", "retrieve.fusion.adaptive_k=2"])
        assert config.retrieve.fusion.adaptive_signal == "margin" and config.retrieve.fusion.adaptive_k == 2
        with pytest.raises(ConfigError, match="adaptive_signal"):
            load_config(None, ["retrieve.fusion.adaptive_signal=gap"])
