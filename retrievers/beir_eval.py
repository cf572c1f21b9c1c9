"""Retrieval benchmark on a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).

The corpus is ingested into a throw-away collection (or a cached one, keyed by the corpus hash and the ingest
settings). Each query runs BM25 and dense retrieval once; the configurations are built from those lists:
`bm25`, `dense`, `hybrid` (the config's fusion) and `hybrid+rerank` (the config's reranker over the first
`retrieve.top_k` fused passages). A configuration's latency is the sum of the stages it uses, measured per query.
"""
from __future__ import annotations

import csv
import json
import tempfile
import time
from pathlib import Path

from configs.schema import SwitchyardConfig
from retrievers.fusion import fuse
from retrievers.ingest import corpus_collection
from retrievers.metrics import METRIC_NAMES, dedupe, percentile, score_query
from retrievers.pipeline import RetrievalStack

EVAL_DEPTH = 100  # documents scored per query (recall@100 needs 100)


class DatasetError(ValueError):
    pass


def load_beir(folder: str | Path, split: str = "test") -> tuple[Path, dict[str, str], dict[str, dict[str, float]]]:
    folder = Path(folder)
    corpus, queries_path, qrels_path = folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"
    for path in (corpus, queries_path, qrels_path):
        if not path.is_file():
            raise DatasetError(f"{folder} is not a BEIR folder: missing {path.relative_to(folder)}")
    qrels: dict[str, dict[str, float]] = {}
    with qrels_path.open(encoding="utf-8") as fh:
        for i, row in enumerate(csv.reader(fh, delimiter="\t")):
            if i == 0 and row and not row[-1].strip().lstrip("-").isdigit():
                continue  # header
            if len(row) < 3:
                raise DatasetError(f"{qrels_path}:{i + 1}: expected query-id<TAB>corpus-id<TAB>score")
            qrels.setdefault(row[0], {})[row[1]] = float(row[2])
    queries: dict[str, str] = {}
    with queries_path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{queries_path}:{lineno}: invalid JSON ({exc.msg})") from None
            if str(rec.get("_id")) in qrels:
                queries[str(rec["_id"])] = rec["text"]
    missing = set(qrels) - set(queries)
    if missing:
        raise DatasetError(f"{len(missing)} query ids in {qrels_path.name} are not in queries.jsonl")
    return corpus, queries, qrels


def evaluate(config: SwitchyardConfig, folder: str | Path, split: str = "test", index_dir: str | None = None,
             limit: int | None = None, progress: bool | None = None) -> dict:
    from tqdm import tqdm

    corpus, queries, qrels = load_beir(folder, split)
    qids = sorted(queries)[:limit] if limit else sorted(queries)
    with tempfile.TemporaryDirectory(prefix="switchyard-eval-") as tmp:
        cfg = config.model_copy(deep=True)
        cfg.store.uri = index_dir or tmp
        retrieve = cfg.retrieve
        retrieve.retrievers.bm25.top_k = max(retrieve.retrievers.bm25.top_k, 2 * EVAL_DEPTH)
        retrieve.retrievers.dense.top_k = max(retrieve.retrievers.dense.top_k, 2 * EVAL_DEPTH)
        cfg.store.collection = corpus_collection([corpus], cfg.ingest.chunk_size, cfg.ingest.chunk_overlap,
                                                 cfg.embedding.model, prefix="beir")
        stack = RetrievalStack(cfg)

        t0 = time.perf_counter()
        report = stack.ingestor(progress=progress).run([corpus])
        index_s = time.perf_counter() - t0
        chunks = stack.store.count()
        if report.ingested == 0:
            raise DatasetError(f"nothing could be ingested from {corpus}: {report.errors[:1]}")

        bm25, dense = stack.bm25(), stack.dense()
        rerank = stack.reranker if cfg.rerank.method != "none" else None
        names = ["bm25", "dense", "hybrid"] + (["hybrid+rerank"] if rerank else [])
        per_query: dict[str, list[dict]] = {n: [] for n in names}
        latency: dict[str, list[float]] = {n: [] for n in names}
        stack.embedder.run(["warm-up"])
        for qid in tqdm(qids, desc="queries", unit="q", disable=not (progress if progress is not None else False)):
            query = queries[qid]
            t = time.perf_counter()
            lex = bm25.run(query)
            t_bm25 = time.perf_counter() - t
            t = time.perf_counter()
            vec = dense.run(query)
            t_dense = time.perf_counter() - t
            t = time.perf_counter()
            fused = fuse({"bm25": lex, "dense": vec}, retrieve.fusion.method, retrieve.fusion.weights,
                         retrieve.fusion.rrf_k)
            t_fuse = time.perf_counter() - t
            rankings = {"bm25": lex, "dense": vec, "hybrid": fused}
            times = {"bm25": t_bm25, "dense": t_dense, "hybrid": t_bm25 + t_dense + t_fuse}
            if rerank:
                head = fused[: retrieve.top_k]
                t = time.perf_counter()
                reranked = rerank.run(query, head, top_k=len(head))
                times["hybrid+rerank"] = times["hybrid"] + time.perf_counter() - t
                rankings["hybrid+rerank"] = reranked + fused[retrieve.top_k:]
            for name in names:
                ranking = dedupe([p.doc_id for p in rankings[name]])[:EVAL_DEPTH]
                per_query[name].append(score_query(ranking, qrels[qid]))
                latency[name].append(times[name] * 1e3)

    results = {}
    for name in names:
        rows = per_query[name]
        results[name] = {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in METRIC_NAMES}
        results[name]["query_ms_p50"] = round(percentile(latency[name], 50), 2)
        results[name]["query_ms_p95"] = round(percentile(latency[name], 95), 2)
    return {
        "dataset": Path(folder).name,
        "split": split,
        "queries": len(qids),
        "index_s": round(index_s, 2),
        "chunks": chunks,
        "results": results,
        "config": cfg.model_dump(mode="json"),
    }


def format_table(result: dict) -> str:
    cols = list(METRIC_NAMES) + ["query_ms_p50", "query_ms_p95"]
    lines = [f"{result['dataset']} ({result['split']}, {result['queries']} queries), index {result['index_s']}s",
             "| configuration | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in result["results"].items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.4f}" if c in METRIC_NAMES else f"{row[c]:.1f}"
                                                 for c in cols) + " |")
    return "\n".join(lines)
