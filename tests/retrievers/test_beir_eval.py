"""eval-retrieval ranks through the stack's own retrievers, fusion and reranker (`QueryRanker`): its hybrid(+rerank)
head is what `Pipeline.search` returns under a no-rewrite config, and its rankings on the fixture BEIR sets are those
of the hand-built path it replaced (real LanceDB indexes on tmp dirs, the real embedding model)."""

from __future__ import annotations

import pytest

from switchyard.configs.loader import load_config
from switchyard.configs.schema import FusionConfig
from switchyard.evaluation.retrieval import QueryRanker, load_beir, prepare_stack
from switchyard.graphs.pipeline import Pipeline
from switchyard.nodes.resources import SharedModels
from switchyard.retrievers.fusion import fuse
from switchyard.run_context import ALL
from tests.conftest import FIXTURES, SAMPLES, session_models

QUESTIONS = [
    "Who patented the knuckle coupler?",
    "What is the standard track gauge?",
    "what slows freight cars rolling down a hump",
    "What does an interlocking prevent?",
]
VARIANTS = {"z": FusionConfig(normalization="zscore", weights={"bm25": 0.5, "dense": 0.5})}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> str:
    """One index for the module: prepare_stack reuses a corpus's collection while the ingest settings match."""
    return str(tmp_path_factory.mktemp("beir") / "index")


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    """A tiny cross-encoder saved once from the MiniLM weights (its head is random: the ranking is not the point)."""
    from sentence_transformers import CrossEncoder

    from switchyard.retrievers.embedder import resolve_model_dir

    folder = tmp_path_factory.mktemp("ce") / "ce"
    CrossEncoder(str(resolve_model_dir("minilm")), num_labels=1, device="cpu").save_pretrained(str(folder))
    return folder


def reranker_settings(name: str, request) -> list[str]:
    if name == "cross_encoder":
        return ["rerank.method=cross_encoder", f"rerank.model={request.getfixturevalue('cross_encoder')}"]
    return [f"rerank.method={name}"]


def ranked(passages) -> list[tuple[str, float]]:
    return [(p.chunk_id, round(p.score, 6)) for p in passages]


@pytest.mark.parametrize("reranker", ["none", "dense_rescore", pytest.param("cross_encoder", marks=pytest.mark.slow)])
def test_hybrid_head_is_what_pipeline_search_returns(index_dir, embedder, e5_embedder, request, reranker):
    # retrieve.top_k below the collection's size: the reranker sees only the fused head, as in `ask`
    config = load_config(
        None,
        [
            "ingest.chunk_size=48",
            "ingest.chunk_overlap=8",
            "retrieve.top_k=6",
            "rerank.top_k=4",
            *reranker_settings(reranker, request),
        ],
    )
    stack, _ = prepare_stack(config, SAMPLES, index_dir, progress=False, **session_models(embedder, e5_embedder))
    assert stack.store.count(ALL) > 6
    ranker = QueryRanker(stack, VARIANTS)
    assert ranker.hybrid is stack.retriever  # the very retriever `retrieval` runs
    head = "hybrid+rerank" if reranker != "none" else "hybrid"
    assert ranker.names == ["bm25", "dense", "e5", "hybrid", "z"] + (["hybrid+rerank"] if reranker != "none" else [])
    cfg = stack.config.model_copy(deep=True)
    cfg.rewrite.method = "none"
    models = SharedModels()
    models.provide(cfg.embedding, embedder)
    models.provide(cfg.embedding, e5_embedder, field=cfg.retrieve.retrievers.e5)
    pipe = Pipeline(cfg, models)
    for question in QUESTIONS:
        rankings, times = ranker.rank(question)
        searched = pipe.search(question).passages
        assert len(searched) == 4 and ranked(rankings[head][:4]) == ranked(searched)
        # the fused list is kept whole, deeper than retrieve.top_k: the benchmark scores 100 documents
        assert len(rankings["hybrid"]) > cfg.retrieve.top_k and set(times) == set(ranker.names)
        if reranker != "none":
            assert {p.chunk_id for p in rankings[head][:6]} == {p.chunk_id for p in rankings["hybrid"][:6]}
            assert rankings[head][6:] == rankings["hybrid"][6:]


def hand_built(stack, query: str, variants: dict[str, FusionConfig]) -> dict[str, list[str]]:
    """The path eval-retrieval took before QueryRanker, as it was written, with e5's list since it is the default:
    BM25, dense and e5 run by hand, their lists fused by `fuse` (a variant's: the lists its weights name), the
    reranker run on the first retrieve.top_k fused passages."""
    cfg = stack.config
    singles = {
        "bm25": stack.bm25(),
        "dense": stack.dense(),
        **{n: stack.field_retriever(n) for n in stack.fused_fields()},
    }
    rankings = {name: retriever.run(query) for name, retriever in singles.items()}
    lists = {name: rankings[name] for name in singles}
    rankings["hybrid"] = fuse(lists, **cfg.retrieve.fusion.model_dump())
    for name, fusion in variants.items():
        rankings[name] = fuse({n: r for n, r in lists.items() if n in fusion.weights}, **fusion.model_dump())
    if cfg.rerank.method != "none":
        fused = rankings["hybrid"]
        head = fused[: cfg.retrieve.top_k]
        rankings["hybrid+rerank"] = stack.reranker.run(query, head, top_k=len(head)) + fused[cfg.retrieve.top_k :]
    return {name: [p.chunk_id for p in ranking] for name, ranking in rankings.items()}


@pytest.mark.parametrize(
    "overrides",
    [
        ["rerank.method=none"],
        ["rerank.method=dense_rescore"],
        pytest.param(
            ["retrieve.fusion.method=rrf", "retrieve.top_k=3", "rerank.method=dense_rescore"], marks=pytest.mark.slow
        ),
        pytest.param(["retrieve.mode=bm25", "retrieve.top_k=2", "rerank.method=dense_rescore"], marks=pytest.mark.slow),
    ],
)
def test_rankings_on_the_fixture_sets_are_the_hand_built_paths(index_dir, embedder, e5_embedder, overrides):
    for dataset in ("beir_rail", "beir_signals"):
        corpus, queries, _ = load_beir(FIXTURES / dataset)
        config = load_config(None, overrides)
        stack, _ = prepare_stack(config, corpus, index_dir, progress=False, **session_models(embedder, e5_embedder))
        ranker = QueryRanker(stack, VARIANTS)
        for query in queries.values():
            rankings, _ = ranker.rank(query)
            got = {name: [p.chunk_id for p in ranking] for name, ranking in rankings.items()}
            assert got == hand_built(stack, query, VARIANTS) and got["hybrid"]
