"""Fusion tuning on the retrieval suite (issue 11 goal 1): grids on the `dev` splits, chosen settings on `test`.

    .venv/bin/python bench/retrieval_suite.py                 # the BEIR folders (seconds)
    nice -n 10 .venv/bin/python bench/fusion_tuning.py cache  # ingest (cached index) + BM25/dense top-200 runs
    .venv/bin/python bench/fusion_tuning.py tune              # grids on dev (--family to pick some)
    .venv/bin/python bench/fusion_tuning.py test              # the chosen settings on test (--split dev), paired p
    .venv/bin/python bench/fusion_tuning.py oracle --split dev  # the bound of per-query weights
    # options: cache [--dataset NAME ...] [--borrow-vectors URI] [--set KEY=VALUE ...] [--runs FOLDER];
    #          tune [--family NAME ...] [--runs FOLDER]; all: [--suite DIR] [--metric ndcg@10]

`cache` runs each query once through BM25 and dense retrieval (the same stack and depth as `cli.py
eval-retrieval`) and keeps the ranked lists, the query vectors and the chunk vectors (for dense feedback) in
bench/out/retrieval-suite/runs/<dataset>.pkl (the index in bench/out/retrieval-suite/index/). `tune` fuses those
lists with retrievers.fusion itself, so its figures are the ones eval-retrieval prints for the same settings; it
prints a Markdown table, one row per setting: nDCG@10 per dataset, the macro average and the margin over the
better single retriever. `test` prints, per dataset, the chosen settings' test score and paired p-values.

This module is also the reader of those cached runs for windows.py, query_adapter.py, second_dense.py and
research/window_sweep.py (load, ranking, per_query, paired_p, dense_run).
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import results
import tables
from common import ROOT

from switchyard.configs.loader import load_config
from switchyard.configs.schema import FusionConfig
from switchyard.evaluation.ranking import METRIC_NAMES, dedupe, score_query
from switchyard.evaluation.retrieval import EVAL_DEPTH, load_beir, prepare_stack
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.embedder import Embedder
from switchyard.retrievers.fusion import fuse, winner_margin  # noqa: F401 (weight_predictor.py reads it here)
from switchyard.run_context import ALL

SUITE = ROOT / "bench" / "out" / "retrieval-suite"
DATASETS = (
    "scifact",
    "hotpotqa",
    "hotpot-single",
    "phantomwiki",
    "nq-toy",
    "nq-open",
    "clapnq",
    "mtrag-clapnq",
    "mtrag-fiqa",
    "squad-intros",
    "squad-low-overlap",
)
SPLITS = ("dev", "test")
DEPTH = 200  # chunks per retriever in the cached runs (prepare_stack asks 2 x EVAL_DEPTH)


class SeededEmbedder(Embedder):
    """Takes the vector of a text some other collection already embedded (same model), embeds the rest: the
    suite's corpora are the ones bench/scale.py seeds its collection with, and embedding is the slow part."""

    def __init__(self, seed: dict[str, np.ndarray], **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.borrowed = 0

    def run(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.seed))
        fresh = dict(zip(missing, super().run(missing))) if missing else {}
        self.borrowed += len(texts) - sum(t in fresh for t in texts)
        return np.stack([self.seed[t] if t in self.seed else fresh[t] for t in texts]) if texts else super().run([])


def seed_vectors(uri: str | None) -> dict[str, np.ndarray]:
    if not uri:
        return {}
    import lancedb

    db = lancedb.connect(uri)
    out = {}
    for name in db.table_names():
        table = db.open_table(name).to_arrow().select(["search_text", "vector"])
        vecs = np.asarray(table["vector"].to_numpy(zero_copy_only=False).tolist(), dtype=np.float32)
        out.update(zip(table["search_text"].to_pylist(), vecs))
    return out


def cache(
    suite: Path, borrow: str | None, only: list[str] | None, overrides: list[str] = (), runs: str = "runs"
) -> None:
    """`overrides`: --set KEY=VALUE for the config the collections are built and searched with (e.g.
    ingest.window_tokens=0 for one vector per chunk); the runs go to suite/`runs`/."""
    out = suite / runs
    config = load_config(None, list(overrides))
    out.mkdir(parents=True, exist_ok=True)
    seed = seed_vectors(borrow)
    for name in sorted(only or DATASETS, key=lambda n: (suite / n / "corpus.jsonl").stat().st_size):
        folder = suite / name
        target = out / f"{name}.pkl"
        if target.exists():
            print(f"{name}: cached ({target})", flush=True)
            continue
        queries, qrels = {}, {}
        for split in SPLITS:
            corpus, q, r = load_beir(folder, split)
            queries.update(q)
            qrels[split] = r
        e = config.embedding
        embedder = SeededEmbedder(
            seed,
            model=e.model,
            batch_size=e.batch_size,
            device=e.device,
            backend=e.backend,
            threads=e.threads,
            precision=e.precision,
        )
        stack, index_s = prepare_stack(config, corpus, str(suite / "index"), progress=True, embedder=embedder)
        bm25, dense = stack.bm25(), stack.dense()
        runs = {"bm25": {}, "dense": {}, "qvec": {}}
        t0 = time.perf_counter()
        for qid, text in queries.items():
            runs["bm25"][qid] = [(p.chunk_id, p.doc_id, p.score) for p in bm25.run(text)]
            runs["qvec"][qid] = stack.embedder.embed_query(text)
            runs["dense"][qid] = [(p.chunk_id, p.doc_id, p.score) for p in dense.run(text)]
        table = stack.store.scan(["chunk_id", "vector"], scope=ALL)
        vectors = dict(
            zip(
                table["chunk_id"].to_pylist(),
                np.asarray(table["vector"].to_numpy(zero_copy_only=False).tolist(), dtype=np.float32),
            )
        )
        with target.open("wb") as fh:
            pickle.dump(
                {
                    "runs": runs,
                    "qrels": qrels,
                    "queries": queries,
                    "vectors": vectors,
                    "index_s": index_s,
                    "chunks": stack.store.count(ALL),
                    "config": stack.config.model_dump(mode="json"),
                },
                fh,
            )
        print(
            f"{name}: {len(queries)} queries in {time.perf_counter() - t0:.0f} s, index {index_s:.0f} s, "
            f"{len(vectors)} chunks ({embedder.borrowed} vectors borrowed)",
            flush=True,
        )


def load(suite: Path, runs: str = "runs") -> dict[str, dict]:
    """Each dataset's cached runs; with e5's list (runs/<name>.e5.pkl, bench/second_dense.py embed) where present."""
    out = {}
    for name in DATASETS:
        path = suite / runs / f"{name}.pkl"
        if path.exists():
            out[name] = pickle.loads(path.read_bytes())
            e5 = path.with_suffix(".e5.pkl")
            if e5.exists():
                out[name]["runs"]["e5"] = pickle.loads(e5.read_bytes())["e5"]
    return out


def _passages(rows) -> list[Passage]:
    return [Passage(chunk_id=c, doc_id=d, source="", title="", text="", score=s) for c, d, s in rows]


def dense_feedback(data: dict, qid: str, fused: list[Passage], docs: int, weight: float) -> list[Passage]:
    """Rocchio in dense space: search again (exactly, as the flat index does) with q + weight * the mean vector
    of the first `docs` fused chunks."""
    ids = [p.chunk_id for p in fused[:docs]]
    q = data["runs"]["qvec"][qid] + weight * np.mean([data["vectors"][c] for c in ids], axis=0)
    q = q / np.linalg.norm(q)
    scores = data["matrix"] @ q
    top = np.argsort(-scores)[: len(data["runs"]["dense"][qid])]
    return [
        Passage(chunk_id=data["ids"][i], doc_id=data["docs"][i], source="", title="", text="", score=float(scores[i]))
        for i in top
    ]


def dense_run(stack_rows, vectors, owner, qids, Q, pool: str) -> dict[str, list]:
    """Exact dense top-DEPTH chunks per query, a chunk scored by its windows (`pool`: max, or lse:TAU).
    `vectors` holds every window vector, `owner` the index in `stack_rows` of the chunk each belongs to."""
    ids, docs = stack_rows
    order = np.argsort(owner, kind="stable")
    vectors, owner = vectors[order], owner[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    chunk_of = np.cumsum(np.r_[False, owner[1:] != owner[:-1]])
    chunk_index = owner[starts]
    dense = {}
    for lo in range(0, len(qids), 64):
        sims = vectors @ Q[lo : lo + 64].T  # windows x queries
        best = np.maximum.reduceat(sims, starts, axis=0)  # chunks x queries
        if pool.startswith("lse:"):  # soft maximum: tau * log sum exp(sim / tau) over a chunk's windows
            tau = float(pool[4:])
            spread = np.exp((sims - best[chunk_of]) / tau)
            best = best + tau * np.log(np.add.reduceat(spread, starts, axis=0))
        for j, q in enumerate(qids[lo : lo + 64]):
            top = np.argsort(-best[:, j])[:DEPTH]
            dense[q] = [(ids[chunk_index[t]], docs[chunk_index[t]], float(best[t, j])) for t in top]
    return dense


def blended_dense(data: dict, qid: str, share: float) -> list[tuple]:
    """The dense list re-scored as share * best window + (1 - share) * the chunk's own cosine, best first."""
    q = data["runs"]["qvec"][qid]
    rows = [(c, d, share * s + (1 - share) * float(data["vectors"][c] @ q)) for c, d, s in data["runs"]["dense"][qid]]
    return sorted(rows, key=lambda r: -r[2])


def chunk_runs(data: dict) -> dict[str, list[tuple]]:
    """Dense retrieval over one vector per chunk (the chunk's own embedding, no windows), exact, top DEPTH per query:
    the list `ingest.window_tokens: 0` gives. Computed once per dataset and kept in data["runs"]["chunk"]."""
    if "chunk" not in data["runs"]:
        if "matrix" not in data:
            prepare(data)
        qids = list(data["runs"]["qvec"])
        Q = np.stack([data["runs"]["qvec"][q] for q in qids])
        out = {}
        for lo in range(0, len(qids), 256):
            sims = data["matrix"] @ Q[lo : lo + 256].T
            for j, q in enumerate(qids[lo : lo + 256]):
                top = np.argsort(-sims[:, j])[:DEPTH]
                out[q] = [(data["ids"][t], data["docs"][t], float(sims[t, j])) for t in top]
        data["runs"]["chunk"] = out
    return data["runs"]["chunk"]


def prepare(data: dict) -> None:
    """The chunk vectors of a cached run as one matrix (rows: data["ids"], their documents data["docs"])."""
    data["ids"] = list(data["vectors"])
    data["matrix"] = np.stack([data["vectors"][c] for c in data["ids"]])
    data["docs"] = [c.rsplit("::", 1)[0] for c in data["ids"]]  # chunk ids are doc_id::n


SINGLES = ("bm25", "dense", "chunk")  # BM25, dense over sentence windows (the default), dense over chunk vectors
E5_SINGLES = (*SINGLES, "e5")  # with multilingual-e5-small over chunks (retrieve.retrievers.e5), for its families


def ranking(data: dict, qid: str, fusion: dict | str) -> list[str]:
    """Doc ids, best first, of 'bm25', 'dense', 'chunk' (chunk_runs), 'e5', 'dense@SHARE' (blended_dense) or a
    fusion: FusionConfig fields plus the bench-only keys prf=(docs, weight), blend=SHARE (blended_dense), chunk=WEIGHT
    (the chunk-vector list fused as a third list with that weight) and e5=WEIGHT (e5's list, likewise)."""
    runs = data["runs"]
    if isinstance(fusion, str):
        name, _, share = fusion.partition("@")
        if name == "chunk":
            return [d for _, d, _ in chunk_runs(data)[qid]]
        return [d for _, d, _ in (blended_dense(data, qid, float(share)) if share else runs[name][qid])]
    fusion = dict(fusion)
    prf, blend = fusion.pop("prf", None), fusion.pop("blend", None)
    chunk, e5 = fusion.pop("chunk", None), fusion.pop("e5", None)
    fc = FusionConfig(**fusion).model_dump()
    dense = runs["dense"][qid] if blend is None else blended_dense(data, qid, blend)
    lists = {"bm25": _passages(runs["bm25"][qid]), "dense": _passages(dense)}
    if chunk:
        lists["chunk"] = _passages(chunk_runs(data)[qid])
        fc["weights"] = {**fc["weights"], "chunk": chunk}
    if e5:
        lists["e5"] = _passages(runs["e5"][qid])
        fc["weights"] = {**fc["weights"], "e5": e5}
    fused = fuse(lists, **fc)
    if prf:
        lists["dense"] = dense_feedback(data, qid, fused, *prf)
        fused = fuse(lists, **fc)
    return [p.doc_id for p in fused]


def score(data: dict, split: str, fusion: dict | str) -> dict[str, float]:
    """Mean metrics of one configuration ('bm25', 'dense' or FusionConfig fields, + prf=(docs, weight)) on a split."""
    return {m: float(v.mean()) for m, v in per_query_metrics(data, split, fusion).items()}


W = [0.3, 0.4, 0.5, 0.55, 0.6, 0.7]


def _w(b: float) -> dict:
    return {"bm25": b, "dense": round(1 - b, 2)}


CANDIDATES = {
    "convex minmax": [dict(normalization="minmax", weights=_w(b)) for b in W],
    "convex max": [dict(normalization="max", weights=_w(b)) for b in W],
    "convex zscore": [dict(normalization="zscore", weights=_w(b)) for b in W],
    "convex dbsf": [dict(normalization="dbsf", weights=_w(b)) for b in W],
    "rrf": [dict(method="rrf", rrf_k=k, weights=_w(b)) for k in (10, 60) for b in (0.4, 0.5, 0.6)],
    "prf": [
        dict(normalization=n, weights=_w(b), prf=(k, beta))
        for n in ("minmax", "max")
        for b in (0.5, 0.55)
        for k in (3, 5)
        for beta in (0.5, 1.0)
    ],
    "adaptive fine": [
        dict(normalization="max", adaptive_power=a, adaptive_depth=depth, weights=_w(b))
        for depth in (20, 100)
        for a in (1, 1.5, 2, 3)
        for b in (0.5, 0.55, 0.6, 0.65)
    ],
    "adaptive": [
        dict(normalization=n, adaptive_power=a, weights=_w(b))
        for n in ("minmax", "max", "zscore", "dbsf")
        for a in (0.5, 1, 2)
        for b in (0.4, 0.5, 0.6)
    ],
    "zscore margin": [
        dict(normalization="zscore", adaptive_power=a, adaptive_signal="margin", adaptive_k=k, weights=_w(b))
        for k in (1, 2, 3, 5)
        for a in (0.5, 1, 2, 3)
        for b in (0.4, 0.5, 0.6)
    ],
    "three lists margin": [
        dict(
            normalization="zscore",
            adaptive_power=a,
            adaptive_signal="margin",
            adaptive_k=k,
            weights={"bm25": b, "dense": round(1 - b - c, 2)},
            chunk=c,
        )
        for k in (2, 3)
        for a in (1, 2)
        for b in (0.4, 0.5)
        for c in (0.1, 0.2)
    ],
    "three lists": [
        dict(normalization=n, weights={"bm25": b, "dense": round(1 - b - c, 2)}, chunk=c)
        for n in ("zscore", "minmax")
        for b in (0.3, 0.4, 0.5)
        for c in (0.15, 0.25, 0.35)
    ],
    "chunk for windows": [
        dict(normalization=n, weights={"bm25": b, "dense": 0.0}, chunk=round(1 - b, 2))
        for n in ("zscore", "minmax")
        for b in (0.3, 0.4, 0.5, 0.6)
    ],
    "e5 three lists": [  # configs/e5.yaml's weights (z-score 0.5 / 0.25 / 0.25) and their neighbours
        dict(normalization=n, weights={"bm25": b, "dense": round(1 - b - e, 2)}, e5=e)
        for n in ("zscore", "max")
        for b in (0.3, 0.4, 0.5)
        for e in (0.15, 0.25, 0.35, 0.45)
        if 1 - b - e >= 0.05
    ],
    "e5 with chunk vectors": [  # windows dropped (their ingest cost) for each chunk's own MiniLM vector
        dict(normalization="zscore", weights={"bm25": b, "dense": 0.0}, chunk=round(1 - b - e, 2), e5=e)
        for b in (0.3, 0.4, 0.5)
        for e in (0.25, 0.35, 0.45)
        if 1 - b - e >= 0.05
    ],
    "e5 for windows": [dict(normalization="zscore", weights={"bm25": b, "dense": 0.0}, e5=round(1 - b, 2)) for b in W],
    "zscore blend": [
        dict(normalization="zscore", blend=share, weights=_w(b))
        for share in (0.5, 0.6, 0.7, 0.8, 0.9)
        for b in (0.45, 0.5, 0.55)
    ],
}


def tune(suite: Path, metric: str, families: list[str], runs: str = "runs") -> None:
    data = load(suite, runs)
    for d in data.values():
        prepare(d)
    names = [n for n in DATASETS if n in data]
    single = {n: {r: score(data[n], "dev", r)[metric] for r in ("bm25", "dense")} for n in names}
    print(f"dev {metric}; margin = worst over datasets of (config - best single retriever)")
    print("| family | settings | " + " | ".join(names) + " | macro | margin |")
    print("|---" * (len(names) + 4) + "|")
    for r in ("bm25", "dense"):
        vals = [single[n][r] for n in names]
        print(f"| {r} | | " + " | ".join(f"{v:.4f}" for v in vals) + f" | {np.mean(vals):.4f} | |")
    for family in families:
        for params in CANDIDATES[family]:
            vals = [score(data[n], "dev", params)[metric] for n in names]
            margin = min(v - max(single[n].values()) for v, n in zip(vals, names))
            print(
                f"| {family} | {params} | "
                + " | ".join(f"{v:.4f}" for v in vals)
                + f" | {np.mean(vals):.4f} | {margin:+.4f} |",
                flush=True,
            )


RULE_EXCLUDES = ("nq-toy",)  # two questions, coincidental labels
RULE_METRICS = ("ndcg@10", "recall@1")
RULE_TIE = 0.002


def worst_ratio(figures: dict[str, dict[str, float]], best: dict[str, dict[str, float]]) -> tuple[float, str]:
    """The rule's score of one configuration: min over datasets d and RULE_METRICS m of figures[d][m] / best[d][m]
    (best: the best single list's figure; a dataset where it is 0 counts as ratio 1), and where it is reached."""
    ratios = {f"{d} {m}": figures[d][m] / best[d][m] if best[d][m] > 0 else 1.0 for d in best for m in RULE_METRICS}
    where = min(ratios, key=ratios.get)
    return ratios[where], where


def rank_by_rule(rows: list[dict]) -> list[dict]:
    """Rows (worst_ratio, macro_ndcg@10) best first: the highest worst ratio wins; rows within RULE_TIE of it are
    tied and ordered by macro nDCG@10; the rest follow by worst ratio."""
    top = max(r["worst_ratio"] for r in rows)

    def order(r: dict) -> tuple:
        tied = r["worst_ratio"] >= top - RULE_TIE
        return (0, -r["macro_ndcg@10"]) if tied else (1, -r["worst_ratio"])

    return sorted(rows, key=order)


_SELECTING: tuple = ()  # (data, dataset names, split) for the forked workers of select


def _score_all(params: dict) -> dict[str, dict[str, float]]:
    data, names, split = _SELECTING
    return {n: score(data[n], split, params) for n in names}


def select(
    suite: Path, families: list[str], runs: str, out: Path | None, split: str = "dev", workers: int = 2
) -> list[dict]:
    """The selection rule (docs/benchmarks.md, "Retrieval on questions asked without seeing the text"): every
    candidate's worst ratio, over the datasets (all but RULE_EXCLUDES) and RULE_METRICS, to the best of the single
    lists (SINGLES) on that dataset and metric; best first (rank_by_rule)."""
    data = load(suite, runs)
    names = [n for n in DATASETS if n in data and n not in RULE_EXCLUDES]
    singles = {n: {r: score(data[n], split, r) for r in SINGLES} for n in names}
    best = {n: {m: max(singles[n][r][m] for r in SINGLES) for m in RULE_METRICS} for n in names}
    rows = []
    candidates = [(f, p) for f in families for p in CANDIDATES[f]]
    global _SELECTING
    _SELECTING = (data, names, split)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        scored = list(pool.map(_score_all, [p for _, p in candidates]))
    for (family, params), figures in [((r, r), {n: singles[n][r] for n in names}) for r in SINGLES] + list(
        zip(candidates, scored)
    ):
        ratio, where = worst_ratio(figures, best)
        rows.append(
            {
                "family": family,
                "settings": params,
                "worst_ratio": round(ratio, 4),
                "worst_at": where,
                "macro_ndcg@10": round(float(np.mean([figures[n]["ndcg@10"] for n in names])), 4),
                "macro_recall@1": round(float(np.mean([figures[n]["recall@1"] for n in names])), 4),
                "figures": {n: {m: round(figures[n][m], 4) for m in RULE_METRICS} for n in names},
            }
        )
    rows = rank_by_rule(rows)
    print(
        f"{split}: worst ratio to the best single list ({', '.join(SINGLES)}) over {', '.join(names)} x "
        f"{', '.join(RULE_METRICS)}; ties within {RULE_TIE} by macro nDCG@10"
    )
    print("| family | settings | worst ratio | where | macro nDCG@10 | macro R@1 |")
    print("|---|---|---|---|---|---|")
    for r in rows[:30] + [r for r in rows[30:] if isinstance(r["settings"], str)]:
        print(
            f"| {r['family']} | {r['settings']} | {r['worst_ratio']:.4f} | {r['worst_at']} | "
            f"{r['macro_ndcg@10']:.4f} | {r['macro_recall@1']:.4f} |"
        )
    if out:
        figures = {"split": split, "rule": "worst-ratio", "datasets": names, "best_single": best, "rows": rows}
        results.record("retrieval_selection", figures, {"families": families, "split": split}, path=out)
    return rows


RULED = ("scifact", "hotpotqa", "nq-open", "squad-intros", "squad-low-overlap")  # >= 300 dev queries each
NOISE_P = 0.05


def significant_losses(
    values: dict[str, np.ndarray],
    best: dict[str, np.ndarray],
    flips: int = 10_000,
    pvalue: Callable[[np.ndarray], float] | None = None,
) -> dict[str, float]:
    """The no-loss rule's test of one configuration: for each key ("dataset metric"), its per-query figures against
    the best single list's on the same queries; the keys where it is lower on average and the paired sign-flip p
    (`pvalue`, default paired_p with `flips`) is below NOISE_P, with their p. tune_reranker.py applies it to the reranker grid."""
    out = {}
    for key, v in values.items():
        diff = v - best[key]
        if diff.mean() < 0:
            p = pvalue(diff) if pvalue else paired_p(diff, flips)
            if p < NOISE_P:
                out[key] = round(p, 4)
    return out


def rank_by_no_loss(rows: list[dict]) -> list[dict]:
    """Rows (losses, macro_ndcg@10) best first: configurations with no significant loss to the best single list,
    by macro nDCG@10 over the ruled sets; then the rest, fewest losses first, each by macro nDCG@10."""
    return sorted(rows, key=lambda r: (len(r["losses"]), -r["macro_ndcg@10"]))


def _per_query_all(params: dict | str) -> dict[str, dict[str, np.ndarray]]:
    data, names, split = _SELECTING
    return {n: per_query_metrics(data[n], split, params, RULE_METRICS) for n in names}


def select_no_loss(
    suite: Path,
    families: list[str],
    runs: str,
    out: Path | None,
    split: str = "dev",
    workers: int = 2,
    ruled_sets: tuple[str, ...] = RULED,
) -> list[dict]:
    """The second selection rule (docs/benchmarks.md, "Retrieval on questions asked without seeing the text"),
    stated after the first failed on test and before this grid ran: on the RULED sets only (>= 300 dev queries),
    no dataset x metric (RULE_METRICS) where a candidate is below the best single list (SINGLES, best on this split)
    beyond noise (paired sign-flip p < NOISE_P); among those, the highest macro nDCG@10 over the RULED sets. The
    other sets are scored and reported, not ruled on. The third rule (`ruled_sets`: every set but RULE_EXCLUDES) is the
    same on all ten sets. With a candidate fusing e5's list, e5 alone is a single list too (E5_SINGLES)."""
    data = load(suite, runs)
    names = [n for n in DATASETS if n in data and n not in RULE_EXCLUDES]
    ruled_sets = tuple(n for n in names if n in ruled_sets)
    singles_used = E5_SINGLES if any("e5" in p for f in families for p in CANDIDATES[f]) else SINGLES
    if "e5" in singles_used and (missing := [n for n in names if "e5" not in data[n]["runs"]]):
        sys.exit(f"no e5 runs for {', '.join(missing)}: run bench/second_dense.py embed --dataset NAME first")
    for n in names:
        chunk_runs(data[n])  # once, before the workers fork
    global _SELECTING
    _SELECTING = (data, names, split)
    candidates = [(r, r) for r in singles_used] + [(f, p) for f in families for p in CANDIDATES[f]]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        scored = list(pool.map(_per_query_all, [p for _, p in candidates]))
    singles = dict(zip(singles_used, scored))
    best = {
        f"{n} {m}": max((singles[r][n][m] for r in singles_used), key=np.mean) for n in ruled_sets for m in RULE_METRICS
    }
    rows = []
    for (family, params), figures in zip(candidates, scored):
        ruled = {f"{n} {m}": figures[n][m] for n in ruled_sets for m in RULE_METRICS}
        rows.append(
            {
                "family": family,
                "settings": params,
                "losses": significant_losses(ruled, best),
                "macro_ndcg@10": round(float(np.mean([figures[n]["ndcg@10"].mean() for n in ruled_sets])), 4),
                "macro_ndcg@10_all": round(float(np.mean([figures[n]["ndcg@10"].mean() for n in names])), 4),
                "figures": {n: {m: round(float(figures[n][m].mean()), 4) for m in RULE_METRICS} for n in names},
            }
        )
    rows = rank_by_no_loss(rows)
    print(
        f"{split}: no loss beyond noise (p < {NOISE_P}) to the best single list ({', '.join(singles_used)}) on "
        f"{', '.join(ruled_sets)} x {', '.join(RULE_METRICS)}; then macro nDCG@10 over those sets"
    )
    print("| family | settings | losses | macro nDCG@10 (ruled) | macro nDCG@10 (all ten) |")
    print("|---|---|---|---|---|")
    for r in rows[:30] + [r for r in rows[30:] if isinstance(r["settings"], str)]:
        losses = ", ".join(f"{k} (p {p})" for k, p in r["losses"].items()) or "none"
        print(
            f"| {r['family']} | {r['settings']} | {losses} | {r['macro_ndcg@10']:.4f} | {r['macro_ndcg@10_all']:.4f} |"
        )
    if out:
        figures = {
            "split": split,
            "rule": "no-loss" if ruled_sets != tuple(names) else "no-loss-all",
            "datasets": names,
            "ruled": ruled_sets,
            "singles": singles_used,
            "best_single": {k: round(float(v.mean()), 4) for k, v in best.items()},
            "rows": rows,
        }
        results.record("retrieval_selection", figures, {"families": families, "split": split}, path=out)
    return rows


def shares(suite: Path, runs: str, split: str) -> None:
    """How lexical each set is: the share of its queries whose first document is relevant, for each single list,
    and the shares only BM25 or only dense (windows) gets right at rank 1; recorded in bench/results/
    retrieval_shares_<split>.json (the data card's table is generated from it)."""
    data = load(suite, runs)
    figures: dict[str, dict] = {}
    for name in [n for n in DATASETS if n in data]:
        qrels = data[name]["qrels"][split]
        hit = {
            r: np.array([bool(rel.get(next(iter(ranking(data[name], q, r)), ""), 0)) for q, rel in qrels.items()])
            for r in SINGLES
        }
        figures[name] = {
            "queries": len(qrels),
            **{r: round(float(hit[r].mean()), 3) for r in SINGLES},
            "only_bm25": round(float((hit["bm25"] & ~hit["dense"]).mean()), 3),
            "only_dense": round(float((hit["dense"] & ~hit["bm25"]).mean()), 3),
        }
    result = {"split": split, "datasets": figures}
    print(tables.shares({"figures": result}))
    print(f"wrote {results.record(f'retrieval_shares_{split}', result, {'split': split, 'runs': runs})}")


def per_query_metrics(
    data: dict, split: str, fusion: dict | str, metrics: tuple[str, ...] = METRIC_NAMES, rank=ranking
) -> dict[str, np.ndarray]:
    """Each of `metrics` per query of `split` for one configuration, every query ranked once; `rank(data, qid,
    fusion)` gives the doc-id ranking."""
    rows = [score_query(dedupe(rank(data, qid, fusion))[:EVAL_DEPTH], rel) for qid, rel in data["qrels"][split].items()]
    return {m: np.array([r[m] for r in rows]) for m in metrics}


def per_query(data: dict, split: str, fusion: dict | str, metric: str, rank=ranking) -> np.ndarray:
    """`metric` per query of `split` for one configuration (per_query_metrics for one metric)."""
    return per_query_metrics(data, split, fusion, (metric,), rank)[metric]


def paired_p(diff: np.ndarray, flips: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization test: how often random sign flips give a mean |diff| this large."""
    if not diff.any():
        return 1.0
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(flips, diff.size))
    return float((np.abs((signs * diff).mean(axis=1)) >= abs(diff.mean()) - 1e-12).mean())


CHOSEN = {  # each selection rule's pick on dev, and the shipped default (test-chosen*.json in bench/eval/)
    "second rule's pick (max, 0.3 / 0.7)": dict(normalization="max", weights=_w(0.3)),
    "first rule's pick (three lists, margin)": dict(
        normalization="zscore",
        adaptive_power=2,
        adaptive_signal="margin",
        adaptive_k=3,
        weights={"bm25": 0.4, "dense": 0.5},
        chunk=0.1,
    ),
    "shipped default (zscore 0.5/0.5)": dict(normalization="zscore", adaptive_power=0, weights=_w(0.5)),
}

E5_CHOSEN = {  # the third rule's pick on dev (dev-select-e5.json), beside configs/e5.yaml and the shipped default
    "third rule's pick (zscore 0.3 / 0.35 / 0.35)": dict(
        normalization="zscore", weights={"bm25": 0.3, "dense": 0.35}, e5=0.35
    ),
    "no windows, dev pick (zscore 0.4 / chunk 0.25 / 0.35)": dict(
        normalization="zscore", weights={"bm25": 0.4, "dense": 0.0}, chunk=0.25, e5=0.35
    ),
    "configs/e5.yaml before (zscore 0.5 / 0.25 / 0.25)": dict(
        normalization="zscore", weights={"bm25": 0.5, "dense": 0.25}, e5=0.25
    ),
    "shipped default (zscore 0.5/0.5)": CHOSEN["shipped default (zscore 0.5/0.5)"],
}


def report_chosen(
    suite: Path, metric: str, split: str, runs: str, chosen: dict = CHOSEN, singles_used: tuple = SINGLES
) -> dict:
    """Each `chosen` setting on `split` for nDCG@10 and R@1: its figure, the difference to the best single list
    (`singles_used`, the best on this split: the stricter comparison) and the paired sign-flip p."""
    data = load(suite, runs)
    out: dict = {}
    print(f"{split}: config - best single list (best on {split}), paired randomization p (10,000 sign flips)")
    for name in [n for n in DATASETS if n in data]:
        out[name] = {}
        for m in RULE_METRICS:
            singles = {r: per_query(data[name], split, r, m) for r in singles_used}
            best = max(singles, key=lambda r: singles[r].mean())
            line = ", ".join(f"{r} {v.mean():.4f}" for r, v in singles.items())
            print(f"{name} {m} ({len(singles[best])} q): {line}")
            out[name][m] = {r: round(float(v.mean()), 4) for r, v in singles.items()}
            out[name][m]["queries"] = len(singles[best])
            for label, params in chosen.items():
                values = per_query(data[name], split, params, m)
                diff = values - singles[best]
                p = paired_p(diff)
                print(f"  {label}: {values.mean():.4f} ({diff.mean():+.4f} vs {best}, p {p:.3f})")
                out[name][m][label] = {
                    "value": round(float(values.mean()), 4),
                    "vs": best,
                    "diff": round(float(diff.mean()), 4),
                    "p": round(p, 4),
                }
    return out


ORACLE_WEIGHTS = (0.2, 0.35, 0.5, 0.65, 0.8)


def oracle(suite: Path, metric: str, split: str, runs: str) -> None:
    """The bound of per-query weighting: each query fused with whichever BM25 weight of ORACLE_WEIGHTS (z-score)
    scores best for it, against the shipped 0.5 and the better single retriever."""
    data = load(suite, runs)
    print(f"{split} {metric}: per-query best z-score weight of {ORACLE_WEIGHTS} (an upper bound, not a method)")
    print("| dataset | bm25 | dense | z-score 0.5 / 0.5 | per-query oracle | oracle - better single |")
    print("|---|---|---|---|---|---|")
    for name in [n for n in DATASETS if n in data]:
        singles = {r: per_query(data[name], split, r, metric).mean() for r in ("bm25", "dense")}
        each = np.stack(
            [per_query(data[name], split, dict(normalization="zscore", weights=_w(b)), metric) for b in ORACLE_WEIGHTS]
        )
        shipped = each[ORACLE_WEIGHTS.index(0.5)].mean()
        best = each.max(axis=0).mean()
        print(
            f"| {name} | {singles['bm25']:.4f} | {singles['dense']:.4f} | {shipped:.4f} | {best:.4f} | "
            f"{best - max(singles.values()):+.4f} |",
            flush=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["cache", "tune", "select", "shares", "test", "oracle"])
    ap.add_argument(
        "--rule",
        default="worst-ratio",
        choices=["worst-ratio", "no-loss", "no-loss-all"],
        help="select: the first rule (worst ratio), the second (no loss beyond noise on sets >= 300 dev queries) or "
        "the third (the second on all ten sets)",
    )
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--metric", default="ndcg@10", choices=METRIC_NAMES)
    ap.add_argument(
        "--borrow-vectors",
        metavar="URI",
        help="cache: take chunk vectors from the LanceDB "
        "collections here where the text matches (e.g. bench/scale.py's seed)",
    )
    ap.add_argument("--dataset", action="append", choices=DATASETS, help="cache: only these (default: all)")
    ap.add_argument("--family", action="append", choices=list(CANDIDATES), help="default: all")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="cache: config overrides for the collections and searches (e.g. ingest.window_tokens=0)",
    )
    ap.add_argument("--runs", default="runs", help="the runs folder under the suite")
    ap.add_argument("--e5", action="store_true", help="test: the third rule's pick (E5_CHOSEN), e5 alone a single list")
    ap.add_argument("--split", default="test", choices=SPLITS, help="test, oracle: the split to report (default test)")
    ap.add_argument(
        "--out",
        type=Path,
        help="select, test: also write the figures here (a result file, bench/results.py; select: every candidate)",
    )
    args = ap.parse_args()
    suite = Path(args.suite)
    if args.step == "cache":
        cache(suite, args.borrow_vectors, args.dataset, args.overrides, args.runs)
    elif args.step == "tune":
        tune(suite, args.metric, args.family or list(CANDIDATES), args.runs)
    elif args.step == "select":
        families = args.family or list(CANDIDATES)
        if args.rule == "worst-ratio":
            select(suite, families, args.runs, args.out, "dev")
        else:
            select_no_loss(
                suite,
                families,
                args.runs,
                args.out,
                "dev",
                ruled_sets=DATASETS if args.rule == "no-loss-all" else RULED,
            )
    elif args.step == "shares":
        shares(suite, args.runs, args.split)
    elif args.step == "oracle":
        oracle(suite, args.metric, args.split, args.runs)
    else:
        chosen, singles_used = (E5_CHOSEN, E5_SINGLES) if args.e5 else (CHOSEN, SINGLES)
        result = report_chosen(suite, args.metric, args.split, args.runs, chosen, singles_used)
        if args.out:
            figures = {"split": args.split, "datasets": result}
            results.record("retrieval_chosen", figures, {"chosen": chosen, "split": args.split}, path=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
