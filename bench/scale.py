"""A million chunks: build, index and search LanceDB collections of 100k and 1M chunks through Switchyard's store.

    nice -n 10 .venv/bin/python bench/scale.py --sizes 100000 1000000 --data DIR   # builds, sweeps, probes
    .venv/bin/python bench/scale.py --sizes 100000 1000000 --data DIR --reuse --candidates   # search only
    nice -n 5 .venv/bin/python bench/scale.py --sizes 100000 --windows 4.4 --data DIR --out bench/out/scale-windows
    .venv/bin/python bench/scale.py --sizes 100000 --e5 --candidates --data DIR --out bench/out/scale-e5

--data is where the seed and the collections are built, outside the repository (default $TMPDIR/switchyard-scale;
~4 GB at 1M chunks, ~1.4 GB for 100k chunks with windows). Steps:

1. Seed (once, cached under --data): real texts -- SciFact abstracts, the HotpotQA dev-sample paragraphs, FlashRAG's
   NQ sample corpus, PhantomWiki s11 articles -- ingested by Switchyard's own Ingestor (chunking + the real MiniLM
   embedder), ~18k real chunks with real vectors.
2. Build: each collection is written by `IndexStore.write_documents` (the ingest's atomic merge-insert commits) in
   batches of --batch chunks. Copy 0 of every seed chunk is the chunk itself; each further copy splices the
   leading part of the chunk's words with the tail of another random seed chunk, and its vector is the matching
   mix of the two real vectors (plus a little noise), renormalised -- new points spread over the real data's
   manifold rather than tight clumps of near-duplicates, with real term statistics for BM25. With --windows MEAN,
   synthetic sentence-window vectors are written too (MEAN per chunk on average). With --e5, the collection also
   has the e5 column (retrieve.retrievers.e5, weights of configs/e5.yaml) filled with a fixed random rotation of
   each chunk's MiniLM vector: for timing only (the same geometry as real vectors; no e5 pass over 1M chunks), while
   the questions are embedded by the real e5 model; the e5 column's ANN index is built and timed too.
3. Index: FTS (BM25) and the vector index are built and timed separately; each vector-index candidate
   (--candidates) is built in turn and each of its search settings scored by recall@10 (and @100) against exact
   (flat) search on a sample of real query vectors, with its dense-search p50. The store's configured index is
   built last and stays.
4. Search: a fresh process opens the collection with the default config (hybrid, no reranking) and times real
   questions, each embedded afresh; its peak RSS is reported.
5. rank_bm25: the in-memory backend's build time, memory and query time on the same collection (in a fresh
   process), where its size limit (`retrieve.retrievers.bm25.max_chunks`) lets it; beyond that it refuses.

Prints progress per size, then two Markdown tables (build / disk / search per size; recall and latency per vector
index and setting). Writes --out/scale.json and --out/config.resolved.yaml (default --out bench/out/scale), and the
figures to bench/results/RESULT.json (--result, default scale; the docs' tables).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import timedelta
from pathlib import Path

import numpy as np
import results as result_files
from common import (
    ROOT,
    SHARED,
    copied_chunk,
    e5_overrides,
    load_average,
    peak_rss_mb,
    rss_mb,
    write_resolved_config,
)

from switchyard.configs.loader import load_config
from switchyard.configs.schema import VectorIndexConfig
from switchyard.evaluation.ranking import percentile
from switchyard.retrievers.stack import RetrievalStack, window_spec
from switchyard.retrievers.store import E5_COLUMN, MULTIVECTOR_HITS_PER_K, IndexStore, VectorSearch
from switchyard.retrievers.store.vector_index import partitions
from switchyard.run_context import ALL

DEFAULT_DATA = Path(tempfile.gettempdir()) / "switchyard-scale"  # ~4 GB at 1M chunks
SEED_COLLECTION = "seed"


# -- seed: real texts and vectors ---------------------------------------------------------------------------------
def write_seed_corpora(folder: Path) -> list[Path]:
    """The real corpora as BEIR-style JSONL files with ids prefixed per source (ids are unique across files)."""
    folder.mkdir(parents=True, exist_ok=True)
    corpora: dict[str, list[dict]] = {"scifact": [], "hotpotqa": [], "nq": [], "phantomwiki": []}
    with (SHARED / "scifact" / "corpus.jsonl").open() as fh:
        for line in fh:
            d = json.loads(line)
            corpora["scifact"].append({"_id": f"scifact-{d['_id']}", "title": d["title"], "text": d["text"]})
    seen: set[str] = set()
    for name in ("dev500.jsonl", "dev300_a.jsonl"):
        with (SHARED / "hotpotqa_dev_distractor_sample" / name).open() as fh:
            for line in fh:
                ctx = json.loads(line)["context"]
                for title, sentences in zip(ctx["title"], ctx["sentences"]):
                    if title not in seen and "".join(sentences).strip():
                        seen.add(title)
                        corpora["hotpotqa"].append(
                            {"_id": f"hotpot-{title}", "title": title, "text": "".join(sentences)}
                        )
    with (SHARED / "flashrag_quickstart" / "sample_corpus.jsonl").open() as fh:
        for line in fh:
            d = json.loads(line)
            title, _, text = d["contents"].partition("\n")
            corpora["nq"].append({"_id": f"nq-{d['id']}", "title": title.strip('"'), "text": text})
    for art in json.loads((SHARED / "phantomwiki-s11" / "articles.json").read_text()):
        corpora["phantomwiki"].append(
            {"_id": f"phantomwiki-{art['title']}", "title": art["title"], "text": art["article"]}
        )
    paths = []
    for name, docs in corpora.items():
        path = folder / f"{name}.jsonl"
        text = "\n".join(json.dumps(d) for d in docs)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths


def seed(data: Path) -> tuple[RetrievalStack, list[dict], np.ndarray]:
    """Real chunks and their real vectors, ingested (incrementally, so once) by Switchyard's Ingestor."""
    # the seed holds one vector per chunk; --windows adds synthetic windows when building (docs/benchmarks.md)
    stack = RetrievalStack(
        load_config(
            None, [f"store.uri={data / 'seed'}", f"store.collection={SEED_COLLECTION}", "ingest.window_tokens=0"]
        )
    )
    report = stack.ingestor(progress=sys.stderr.isatty()).run(write_seed_corpora(data / "seed-corpus"))
    rows = stack.store.scan(["doc_id", "source", "title", "text", "chunk_index", "vector"], scope=ALL).to_pylist()
    vectors = np.asarray([r.pop("vector") for r in rows], dtype=np.float32)
    print(f"seed: {len(rows)} real chunks with real MiniLM vectors ({report.summary()})", flush=True)
    return stack, rows, vectors


def questions(limit: int) -> list[str]:
    """Real questions, SciFact claims and HotpotQA questions interleaved (the two kinds the seed texts answer)."""
    with (SHARED / "scifact" / "queries.jsonl").open() as fh:
        scifact = [json.loads(line)["text"] for line in fh]
    with (SHARED / "hotpotqa_dev_distractor_sample" / "dev500.jsonl").open() as fh:
        hotpot = [json.loads(line)["question"] for line in fh]
    mixed = [q for pair in zip(scifact, hotpot) for q in pair]
    return mixed[:limit]


# -- build --------------------------------------------------------------------------------------------------------
def doc_groups(rows: list[dict]) -> list[tuple[int, int]]:
    """[start, end) of each document's chunks in `rows` (sorted by doc_id, chunk_index)."""
    bounds = [0] + [i for i in range(1, len(rows)) if rows[i]["doc_id"] != rows[i - 1]["doc_id"]] + [len(rows)]
    return list(zip(bounds, bounds[1:]))


def variant_batches(rows: list[dict], vectors: np.ndarray, size: int, batch: int, seed: int = 0):
    """(doc_ids, chunks, vectors) batches making a collection of `size` chunks, whole documents per batch.

    Copy c of seed chunk i (c >= 1) keeps the first w of i's words and ends with the last words of a random
    partner chunk j (same length as i); its vector is normalise(w v_i + (1 - w) v_j + noise), w ~ U(0.5, 0.9).
    """
    n, dim = vectors.shape
    words = [r["text"].split() for r in rows]
    groups = doc_groups(rows)
    produced = 0
    pending: tuple[list, list, list] = ([], [], [])
    for copy in range(math.ceil(size / n)):
        rng = np.random.default_rng([seed, copy])
        partner, w = rng.integers(0, n, n), rng.uniform(0.5, 0.9, n)
        if copy:
            mixed = w[:, None] * vectors + (1 - w[:, None]) * vectors[partner] + rng.normal(0, 0.01, (n, dim))
            mixed = (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)
        else:
            mixed = vectors
        for start, end in groups:
            end = min(end, start + size - produced)
            if end <= start:
                break
            doc_id = f"{rows[start]['doc_id']}~{copy}"
            for i in range(start, end):
                src = rows[i]
                if copy:
                    keep = max(1, round(w[i] * len(words[i])))
                    tail = (
                        words[partner[i]][len(words[partner[i]]) - (len(words[i]) - keep) :]
                        if len(words[i]) > keep
                        else []
                    )
                    text = " ".join(words[i][:keep] + tail)
                else:
                    text = src["text"]
                pending[0].append(copied_chunk(src, doc_id, text, "scale"))
                pending[1].append(mixed[i])
            pending[2].append(doc_id)
            produced += end - start
            if len(pending[0]) >= batch or produced == size:
                yield pending[2], pending[0], np.asarray(pending[1], dtype=np.float32)
                pending = ([], [], [])
            if produced == size:
                return


def synthetic_windows(vectors: np.ndarray, mean: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Sentence-window vectors for chunks whose text is synthetic: 1 + Binomial(8, (mean - 1) / 8) windows per chunk
    (real collections: 2.8-4.4 on average, 1-9 each), each normalise(v + N(0, 0.0316^2 I)), so that its cosine to the
    chunk's vector is ~0.85, as measured between real windows and their chunk (0.82-0.87 over the suite's datasets)."""
    counts = 1 + rng.binomial(8, (mean - 1) / 8, len(vectors))
    out = []
    for v, n in zip(vectors, counts):
        w = v[None, :] + rng.normal(0, 0.0316, (n, v.shape[0]))
        out.append((w / np.linalg.norm(w, axis=1, keepdims=True)).astype(np.float32))
    return out


def disk_mb(store: IndexStore) -> float:
    folder = Path(store.uri) / f"{store.collection}.lance"
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def build(
    store: IndexStore,
    rows: list[dict],
    vectors: np.ndarray,
    size: int,
    batch: int,
    windows: float = 0.0,
    e5: bool = False,
) -> dict:
    """Write the collection through `IndexStore.write_documents` (with `windows` synthetic window vectors per chunk on
    average, if > 0), then compact and build the FTS index."""
    if store.exists():  # before the table is first opened through this store
        store.db.drop_table(store.collection)
    t0 = time.perf_counter()
    write_s = 0.0
    rng = np.random.default_rng(1)
    rotation = np.linalg.qr(np.random.default_rng(2).normal(size=(vectors.shape[1],) * 2))[0].astype(np.float32)
    for doc_ids, chunks, vecs in variant_batches(rows, vectors, size, batch):
        window_vectors = synthetic_windows(vecs, windows, rng) if windows else None
        t = time.perf_counter()
        store.write_documents(doc_ids, chunks, vecs, window_vectors, {"e5": vecs @ rotation} if e5 else None)
        write_s += time.perf_counter() - t
    write_total = time.perf_counter() - t0
    t = time.perf_counter()
    store.optimize()  # what refresh_indexes does first with the batch commits' small fragments
    compact_s = time.perf_counter() - t
    t = time.perf_counter()
    store.ensure_text_index()
    fts_s = time.perf_counter() - t
    stats = {
        "rows": store.count(ALL),
        "searched_vectors": store.searched_vectors(),
        "build_s": write_total,
        "write_s": write_s,
        "compact_s": compact_s,
        "fts_s": fts_s,
    }
    print(
        f"  built {stats['rows']:,} rows ({stats['searched_vectors']:,} searched vectors) in {write_total:.0f}s "
        f"(writes {write_s:.0f}s), compaction {compact_s:.0f}s, FTS index {fts_s:.0f}s",
        flush=True,
    )
    return stats


# -- vector index choice --------------------------------------------------------------------------------------------
def sweep(spec: VectorIndexConfig, partitions: int, min_ef: int = 0) -> list[dict]:
    """Search settings tried on a built index: the configured ones first, then the usual knobs (`min_ef`: the
    smallest ef the search takes, 10 k over window vectors)."""
    if spec.kind == "ivf_hnsw_sq":
        tries = [{"ef": max(300, min_ef)}, {"ef": max(600, 2 * min_ef)}]
        if partitions > 1:
            tries.append({"nprobes": max(1, partitions // 4)})
    else:
        tries = [
            {"nprobes": 20, "refine_factor": 0},
            {"nprobes": 20, "refine_factor": 5},
            {"nprobes": 50, "refine_factor": 5},
            {"nprobes": 50, "refine_factor": 10},
        ]
    seen, out = set(), []
    for setting in [{}] + tries:  # e.g. nprobes 0 and 20 are the same search
        if settings_label(spec.model_copy(update=setting)) not in seen:
            seen.add(settings_label(spec.model_copy(update=setting)))
            out.append(setting)
    return out


def parse_candidate(text: str) -> VectorIndexConfig:
    """'ivf_pq' or 'ivf_pq:num_partitions=256:num_sub_vectors=48' -> VectorIndexConfig."""
    kind, *params = text.split(":")
    return VectorIndexConfig(kind=kind, **{k: int(v) for k, v in (p.split("=") for p in params)})


def label(spec: VectorIndexConfig, rows: int) -> str:
    parts = [spec.kind, f"partitions {partitions(spec, rows)}"]
    if spec.kind == "ivf_pq":
        parts.append(f"sub-vectors {spec.num_sub_vectors or 'dim/8'}")
    return ", ".join(parts)


def settings_label(spec: VectorIndexConfig) -> str:
    if spec.kind == "ivf_hnsw_sq":
        return f"nprobes {spec.nprobes or 20}, ef {spec.ef or '1.5 k'}"
    return f"nprobes {spec.nprobes or 20}, refine {spec.refine_factor or 'off'}"


def exact_top(store: IndexStore, qvecs: np.ndarray, k: int) -> tuple[list[list[str]], list[float]]:
    """Flat (exhaustive) search: the ground truth, and its latency."""
    out, times = [], []
    for q in qvecs:
        t = time.perf_counter()
        res = (
            store.table()
            .search(q, vector_column_name=store.vector_column)
            .distance_type("cosine")
            .bypass_vector_index()
            .select(["chunk_id", "_distance"])
            .limit(k)
            .to_arrow()
        )
        times.append((time.perf_counter() - t) * 1e3)
        out.append(res["chunk_id"].to_pylist())
    return out, times


def score_index(store: IndexStore, qvecs: np.ndarray, truth: list[list[str]], k: int) -> dict:
    """recall@10 / recall@k of the store's configured vector search against exact search, and its p50 (ms)."""
    r10, rk, times = [], [], []
    for q, exact in zip(qvecs, truth):
        t = time.perf_counter()
        got = [p.chunk_id for p in VectorSearch(store).run(q, k)]
        times.append((time.perf_counter() - t) * 1e3)
        r10.append(len(set(got[:10]) & set(exact[:10])) / 10)
        rk.append(len(set(got) & set(exact)) / len(exact))
    return {
        "recall@10": float(np.mean(r10)),
        f"recall@{k}": float(np.mean(rk)),
        "p50_ms": percentile(times, 50),
        "p95_ms": percentile(times, 95),
    }


def choose_index(
    store: IndexStore,
    candidates: list[VectorIndexConfig],
    final: VectorIndexConfig,
    qvecs: np.ndarray,
    k: int,
    built_s: float | None = None,
) -> list[dict]:
    """Build each candidate index (the configured one last, so it stays) and score its search settings.
    `built_s`: the configured index is already built (in that many seconds); score it without rebuilding."""
    rows = store.count(ALL)
    truth, exact_ms = exact_top(store, qvecs, k)
    results = [
        {
            "index": "none (exact flat search)",
            "build_s": 0.0,
            "settings": "-",
            "recall@10": 1.0,
            f"recall@{k}": 1.0,
            "p50_ms": percentile(exact_ms, 50),
            "p95_ms": percentile(exact_ms, 95),
        }
    ]
    print(f"  exact flat search: p50 {results[0]['p50_ms']:.1f} ms", flush=True)
    order = [c for c in candidates if c != final] + [final]
    for spec in order:
        store.vector_index = spec
        t = time.perf_counter()
        if built_s is None or spec != final:
            store.build_vector_index()
        build_s = time.perf_counter() - t if built_s is None or spec != final else built_s
        for setting in sweep(spec, partitions(spec, rows), MULTIVECTOR_HITS_PER_K * k if store.has_windows else 0):
            store.vector_index = spec.model_copy(update=setting)
            VectorSearch(store).run(qvecs[0], k)  # warm the index cache
            res = {
                "index": label(spec, rows),
                "build_s": build_s,
                "settings": settings_label(store.vector_index)
                + (" (configured)" if store.vector_index == final else ""),
                **score_index(store, qvecs, truth, k),
            }
            results.append(res)
            print(
                f"  {res['index']} [{res['settings']}]: built in {build_s:.0f}s, recall@10 {res['recall@10']:.3f}, "
                f"recall@{k} {res[f'recall@{k}']:.3f}, dense p50 {res['p50_ms']:.1f} ms",
                flush=True,
            )
    store.vector_index = final
    return results


# -- probes in fresh processes (peak RSS of a process that only searches) -------------------------------------------
def probe_search(uri: str, collection: str, n_queries: int, overrides: list[str]) -> dict:
    """Open the collection with the default config (hybrid, no reranking) and time real questions."""
    stack = RetrievalStack(load_config(None, [f"store.uri={uri}", f"store.collection={collection}", *overrides]))
    stack.embedder.warm_up()
    stack.embedder.run(["warm-up"])
    model_rss = rss_mb()
    qs = questions(n_queries + 5)
    warmup, timed = qs[:5], qs[5:]
    for q in warmup:
        stack.search(q, rerank=False, groups=ALL)
    stack.embedder.clear_cache()  # every timed query pays for its own embedding
    total, parts, embed = [], {r.name: [] for r in stack.retriever.retrievers}, []
    for q in timed:
        t = time.perf_counter()
        stack.search(q, rerank=False, groups=ALL)
        total.append((time.perf_counter() - t) * 1e3)
    for q in timed:
        t = time.perf_counter()
        stack.embedder.run([q])
        embed.append((time.perf_counter() - t) * 1e3)
    stack.embedder.clear_cache()
    for retriever in stack.retriever.retrievers:
        for q in timed:
            t = time.perf_counter()
            retriever.run(q)
            parts[retriever.name].append((time.perf_counter() - t) * 1e3)
    return {
        "p50_ms": percentile(total, 50),
        "p95_ms": percentile(total, 95),
        "bm25_p50_ms": percentile(parts["bm25"], 50),
        "dense_p50_ms": percentile(parts["dense"], 50),
        "embed_p50_ms": percentile(embed, 50),
        **({"e5_p50_ms": percentile(parts["e5"], 50)} if "e5" in parts else {}),
        "model_rss_mb": model_rss,
        "peak_rss_mb": peak_rss_mb(),
    }


def probe_rank_bm25(uri: str, collection: str, n_queries: int) -> dict:
    """The rank_bm25 backend over the whole collection: build time, memory, query time."""
    from switchyard.retrievers.bm25 import RankBM25Retriever

    store = IndexStore(uri, collection)
    rows = store.count(ALL)
    retriever = RankBM25Retriever(store, max_chunks=rows)
    base = rss_mb()
    t = time.perf_counter()
    retriever.run("warm-up")
    build_s = time.perf_counter() - t
    held = rss_mb() - base
    times = []
    for q in questions(n_queries):
        t = time.perf_counter()
        retriever.run(q)
        times.append((time.perf_counter() - t) * 1e3)
    return {
        "rows": rows,
        "build_s": build_s,
        "held_mb": held,
        "mb_per_1k_chunks": held / rows * 1000,
        "peak_rss_mb": peak_rss_mb(),
        "p50_ms": percentile(times, 50),
    }


def run_probe(args: list[str], timeout: int) -> dict:
    """Run this script's probe mode in a fresh process (under the caller's nice level) and read its JSON line."""
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"probe {args[0]} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- main -----------------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000], help="none: only the seed")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="where collections are built (not the repo)")
    parser.add_argument("--batch", type=int, default=20_000, help="chunks per atomic write (whole documents)")
    parser.add_argument("--queries", type=int, default=200, help="timed hybrid searches")
    parser.add_argument("--recall-queries", type=int, default=200, help="query vectors scored against exact search")
    parser.add_argument(
        "--candidates",
        nargs="*",
        default=["ivf_hnsw_sq", "ivf_pq"],
        help="vector indexes to compare, e.g. ivf_pq:num_partitions=256:num_sub_vectors=48",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="config override for the configured index and the search probe (a.b=c)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep an existing collection of the right size (and, "
        "with --candidates given no values, its vector index: only search is measured again)",
    )
    parser.add_argument(
        "--rank-bm25-max",
        type=int,
        default=None,
        help="largest collection the rank_bm25 probe may load (default: its configured limit)",
    )
    parser.add_argument(
        "--windows",
        type=float,
        default=0.0,
        metavar="MEAN",
        help="also write sentence-window vectors, MEAN per chunk on average (synthetic: see "
        "synthetic_windows; 4.4 is SciFact's); 0: one vector per chunk, as goal 3 measured",
    )
    parser.add_argument(
        "--e5",
        action="store_true",
        help="also an e5 column (timing only: see the docstring) and search with retrieve.retrievers.e5 on",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "scale"))
    parser.add_argument("--result", default="scale", help="the result file's name: bench/results/NAME.json")
    parser.add_argument("--probe", choices=["search", "rank_bm25"], help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--collection", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.e5:
        args.overrides += e5_overrides()

    if args.probe == "search":
        print(json.dumps(probe_search(args.uri, args.collection, args.queries, args.overrides)))
        return
    if args.probe == "rank_bm25":
        print(json.dumps(probe_rank_bm25(args.uri, args.collection, args.queries)))
        return

    load = {"start": load_average()}
    print(f"load at start: {load['start'][0]:.2f} (1-min average, {os.cpu_count()} cores)", flush=True)
    config = load_config(None, args.overrides)
    write_resolved_config(config, Path(args.out))
    rank_bm25_max = args.rank_bm25_max or config.retrieve.retrievers.bm25.max_chunks
    stack, rows, vectors = seed(args.data)
    rows_order = sorted(range(len(rows)), key=lambda i: (rows[i]["doc_id"], rows[i]["chunk_index"]))
    rows, vectors = [rows[i] for i in rows_order], vectors[rows_order]
    qvecs = stack.embedder.run(questions(args.queries + 5 + args.recall_queries)[-args.recall_queries :])
    k = config.retrieve.retrievers.dense.top_k
    final = config.store.vector_index
    candidates = [parse_candidate(c) for c in args.candidates]
    report = {}
    for size in args.sizes:
        print(f"== {size:,} chunks", flush=True)
        name = f"scale-{size}" + (f"-windows{args.windows:g}" if args.windows else "") + ("-e5" if args.e5 else "")
        store = IndexStore(
            str(args.data / "db"),
            name,
            dim=vectors.shape[1],
            vector_index=final,
            vector_index_min_rows=config.store.vector_index_min_rows,
            windows=window_spec(config) if args.windows else None,
            vector_fields={"e5": vectors.shape[1]} if args.e5 else None,
        )
        meta_path = args.data / f"{name}.json"
        if args.reuse and store.exists() and store.count(ALL) == size and meta_path.is_file():
            stats = json.loads(meta_path.read_text())
            print(f"  reusing the collection built in {stats['build_s']:.0f}s", flush=True)
        else:
            stats = build(store, rows, vectors, size, args.batch, args.windows, args.e5)
            meta_path.write_text(json.dumps(stats))
        keep = args.reuse and not candidates and store.has_vector_index() and "vector_index_s" in stats
        index_results = choose_index(
            store, candidates, final, qvecs, k, built_s=stats["vector_index_s"] if keep else None
        )
        stats["vector_index_s"] = next(
            r["build_s"] for r in reversed(index_results) if r["index"] == label(final, size)
        )
        if args.e5 and not store.has_vector_index(E5_COLUMN):
            t = time.perf_counter()
            store.build_vector_index(E5_COLUMN)
            stats["e5_vector_index_s"] = time.perf_counter() - t
            print(f"  e5 column's vector index built in {stats['e5_vector_index_s']:.0f}s", flush=True)
        meta_path.write_text(json.dumps(stats))
        stats["disk_mb_all_versions"] = disk_mb(store)
        with warnings.catch_warnings():  # "removes every version except the latest": intended, nobody else reads
            warnings.simplefilter("ignore")
            store.table().optimize(cleanup_older_than=timedelta(0))  # drop the candidates' old index files
        stats["disk_mb"] = disk_mb(store)
        probe_args = ["--uri", str(store.uri), "--collection", store.collection]
        search = run_probe(
            ["--probe", "search", *probe_args, "--queries", str(args.queries), *[f"--set={o}" for o in args.overrides]],
            timeout=1800,
        )
        print(
            f"  disk {stats['disk_mb']:.0f} MB; hybrid search p50 {search['p50_ms']:.1f} ms / p95 "
            f"{search['p95_ms']:.1f} ms (bm25 p50 {search['bm25_p50_ms']:.1f}, dense p50 "
            f"{search['dense_p50_ms']:.1f}, of which embedding the question {search['embed_p50_ms']:.1f}"
            + (f"; e5 p50 {search['e5_p50_ms']:.1f}" if "e5_p50_ms" in search else "")
            + "); "
            f"search process peak RSS {search['peak_rss_mb']:.0f} MB "
            f"(model loaded: {search['model_rss_mb']:.0f} MB)",
            flush=True,
        )
        if size <= rank_bm25_max:
            bm25 = run_probe(
                ["--probe", "rank_bm25", *probe_args, "--queries", "20" if size <= 200_000 else "5"], timeout=3600
            )
            print(
                f"  rank_bm25: built in {bm25['build_s']:.0f}s, holds {bm25['held_mb']:.0f} MB "
                f"({bm25['mb_per_1k_chunks']:.1f} MB per 1k chunks), peak RSS {bm25['peak_rss_mb']:.0f} MB, "
                f"query p50 {bm25['p50_ms']:.0f} ms",
                flush=True,
            )
        else:
            bm25 = {"refused": f"{size:,} chunks > max_chunks {rank_bm25_max:,}"}
            print(f"  rank_bm25: not loaded ({bm25['refused']}; the backend refuses such a collection)", flush=True)
        report[size] = {**stats, "search": search, "vector_indexes": index_results, "rank_bm25": bm25}
    (Path(args.out) / "scale.json").write_text(json.dumps(report, indent=1))
    print_tables(report, k)
    load["end"] = load_average()
    print(f"load at end: {load['end'][0]:.2f}")
    figures = {
        "sizes": {str(size): r for size, r in report.items()},
        "k": k,
        "windows_per_chunk": args.windows,
        "e5": args.e5,
        "seed_chunks": len(rows),
        "load_average": load,
    }
    config_record = {"args": {a: v for a, v in vars(args).items() if a not in ("probe", "uri", "collection")}}
    print(f"recorded {result_files.record(args.result, figures, config_record).relative_to(ROOT)}")


def print_tables(report: dict, k: int) -> None:
    print(
        "\n| chunks | build s | compaction s | FTS index s | vector index s | disk MB | search peak RSS MB "
        "| hybrid p50 / p95 ms | bm25 / dense / embed p50 ms | rank_bm25 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size, r in report.items():
        s, b = r["search"], r["rank_bm25"]
        rank_bm25 = b.get("refused") or f"{b['held_mb']:.0f} MB, built {b['build_s']:.0f} s, p50 {b['p50_ms']:.0f} ms"
        print(
            f"| {size:,} | {r['build_s']:.0f} | {r['compact_s']:.0f} | {r['fts_s']:.0f} | {r['vector_index_s']:.0f} "
            f"| {r['disk_mb']:.0f} | {s['peak_rss_mb']:.0f} | **{s['p50_ms']:.1f} / {s['p95_ms']:.1f}** "
            f"| {s['bm25_p50_ms']:.1f} / {s['dense_p50_ms']:.1f} / {s['embed_p50_ms']:.1f} | {rank_bm25} |"
        )
    print(f"\n| chunks | vector index | search settings | build s | recall@10 | recall@{k} | dense p50 / p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for size, r in report.items():
        for v in r["vector_indexes"]:
            print(
                f"| {size:,} | {v['index']} | {v['settings']} | {v['build_s']:.0f} | {v['recall@10']:.3f} "
                f"| {v[f'recall@{k}']:.3f} | {v['p50_ms']:.1f} / {v['p95_ms']:.1f} |"
            )


if __name__ == "__main__":
    main()
