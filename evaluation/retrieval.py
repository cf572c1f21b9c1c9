"""Retrieval benchmark on a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).

The corpus is ingested into a throw-away collection (or a cached one, keyed by the corpus hash and the ingest
settings). Each query is ranked through the stack's own parts (`QueryRanker`): the retrievers hybrid mode fuses
(BM25, dense, e5 when enabled) run once; the configurations are built from those lists: `bm25`, `dense`, `hybrid`
(the stack's hybrid retriever fusing them, as `ask` retrieves) and `hybrid+rerank` (the stack's reranker over the
first `retrieve.top_k` fused passages, as `ask` reranks its candidates). What the benchmark needs differs from
`ask` on purpose: no rewrite step, deeper retriever lists, the whole fused list scored. A configuration's latency
is the sum of the stages it uses, measured per query.
"""

from __future__ import annotations

import csv
import json
import tempfile
import time
from pathlib import Path

from switchyard.configs.schema import FusionConfig, SwitchyardConfig
from switchyard.errors import DatasetError
from switchyard.evaluation.ranking import METRIC_NAMES, dedupe, percentile, score_query
from switchyard.retrievers.documents import Passage
from switchyard.retrievers.embedder import Embedder, TextEmbedder
from switchyard.retrievers.query_adapter import (
    QueryAdapter,
    check_adapter_path,
    check_fit_settings,
    collect_examples,
    fit,
)
from switchyard.retrievers.stack import RetrievalStack, corpus_collection_for
from switchyard.run_context import ALL

EVAL_DEPTH = 100  # documents scored per query (recall@100 needs 100)


def load_beir(folder: str | Path, split: str = "test") -> tuple[Path, dict[str, str], dict[str, dict[str, float]]]:
    folder = Path(folder)
    corpus, queries_path, qrels_path = (
        folder / "corpus.jsonl",
        folder / "queries.jsonl",
        folder / "qrels" / f"{split}.tsv",
    )
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


def prepare_stack(
    config: SwitchyardConfig,
    corpus: Path,
    index_uri: str,
    progress: bool | None = None,
    embedder: Embedder | None = None,
    field_embedders: dict[str, TextEmbedder] | None = None,
) -> tuple[RetrievalStack, float]:
    """A stack whose collection holds `corpus` (ingested now, or found unchanged in a cached one under
    `index_uri`), with each retriever returning enough chunks to rank EVAL_DEPTH documents; and the ingest time.
    `embedder` and `field_embedders`: already loaded models to use (RetrievalStack's arguments)."""
    cfg = config.model_copy(deep=True)
    cfg.store.uri = index_uri
    retrievers = cfg.retrieve.retrievers
    retrievers.bm25.top_k = max(retrievers.bm25.top_k, 2 * EVAL_DEPTH)
    retrievers.dense.top_k = max(retrievers.dense.top_k, 2 * EVAL_DEPTH)
    for f in retrievers.fields().values():
        f.top_k = max(f.top_k, 2 * EVAL_DEPTH)
    cfg.store.collection = corpus_collection_for(cfg, [corpus], prefix="beir")
    stack = RetrievalStack(cfg, embedder=embedder, field_embedders=field_embedders)
    t0 = time.perf_counter()
    report = stack.ingestor(progress=progress).run([corpus])
    index_s = time.perf_counter() - t0
    if report.ingested == 0:
        raise DatasetError(f"nothing could be ingested from {corpus}: {report.errors[:1]}")
    return stack, index_s


class QueryRanker:
    """Ranks one query for the benchmark through `stack`'s own retrievers, fusion and reranker: each retriever of
    `stack.hybrid_parts()` once (timed alone), `hybrid` = the stack's hybrid retriever fusing those lists (each named
    fusion variant fuses those its weights name: a variant whose weights leave e5 out is one without e5, as a config
    with those weights would be), `hybrid+rerank` = the stack's reranker (`retrieval.rerank`) over the first
    `retrieve.top_k` fused passages, followed by the rest. Unlike `ask`: no rewrite, the whole fused list is kept."""

    def __init__(self, stack: RetrievalStack, variants: dict[str, FusionConfig] | None = None):
        self.stack = stack
        self.top_k = stack.config.retrieve.top_k
        self.hybrid = stack.hybrid_retriever()
        self.singles = {r.name: r for r in self.hybrid.retrievers}
        self.fusions = {
            "hybrid": self.hybrid,
            **{name: stack.hybrid_retriever(fusion) for name, fusion in (variants or {}).items()},
        }
        self.rerank = stack.config.rerank.method != "none"
        self.names = [*self.singles, *self.fusions] + (["hybrid+rerank"] if self.rerank else [])

    def warm_up(self) -> None:
        self.stack.embedder.run(["warm-up"])
        for name in self.stack.enabled_fields():
            self.stack.field_embedder(name).run(["warm-up"])

    def rank(self, query: str) -> tuple[dict[str, list[Passage]], dict[str, float]]:
        """Each configuration's ranking of `query`, and the seconds each took."""
        rankings: dict[str, list[Passage]] = {}
        times: dict[str, float] = {}
        for name, retriever in self.singles.items():
            t = time.perf_counter()
            rankings[name] = retriever.run(query)
            times[name] = time.perf_counter() - t
        lists = {name: rankings[name] for name in self.singles}
        whole = sum(len(ranked) for ranked in lists.values()) or 1
        for name, hybrid in self.fusions.items():
            t = time.perf_counter()
            named = lists if name == "hybrid" else {n: ranked for n, ranked in lists.items() if n in hybrid.weights}
            rankings[name] = hybrid.fuse(named, top_k=whole)
            times[name] = sum(times[n] for n in self.singles) + time.perf_counter() - t
        if self.rerank:
            fused = rankings["hybrid"]
            head = fused[: self.top_k]
            t = time.perf_counter()
            reranked = self.stack.retrieval.rerank(query, head, top_k=len(head)) if head else []
            times["hybrid+rerank"] = times["hybrid"] + time.perf_counter() - t
            rankings["hybrid+rerank"] = reranked + fused[self.top_k :]
        return rankings, times


def evaluate(
    config: SwitchyardConfig,
    folder: str | Path,
    split: str = "test",
    index_dir: str | None = None,
    limit: int | None = None,
    progress: bool | None = None,
    variants: dict[str, FusionConfig] | None = None,
) -> dict:
    """Scores bm25, dense (and each enabled vector field, e.g. retrieve.retrievers.e5), hybrid (the config's fusion of those
    lists), each named fusion variant (over the same lists) and, with a reranker configured, hybrid+rerank."""
    from tqdm import tqdm

    variants = dict(variants or {})
    clash = set(variants) & {"bm25", "dense", *config.retrieve.retrievers.fields(), "hybrid", "hybrid+rerank"}
    if clash:
        raise DatasetError(f"fusion variant names must differ from the built-in configurations: {sorted(clash)}")
    corpus, queries, qrels = load_beir(folder, split)
    qids = sorted(queries)[:limit] if limit else sorted(queries)
    with tempfile.TemporaryDirectory(prefix="switchyard-eval-") as tmp:
        stack, index_s = prepare_stack(config, corpus, index_dir or tmp, progress)
        cfg = stack.config
        chunks = stack.store.count(ALL)
        ranker = QueryRanker(stack, variants)
        names = ranker.names
        per_query: dict[str, list[dict]] = {n: [] for n in names}
        latency: dict[str, list[float]] = {n: [] for n in names}
        ranker.warm_up()
        for qid in tqdm(qids, desc="queries", unit="q", disable=not (progress if progress is not None else False)):
            rankings, times = ranker.rank(queries[qid])
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
        "singles": list(ranker.singles),
        "default": "hybrid+rerank" if ranker.rerank else "hybrid",
        "config": cfg.model_dump(mode="json"),
        "variants": {name: v.model_dump(mode="json") for name, v in variants.items()},
    }


def fit_adapter(
    config: SwitchyardConfig,
    folder: str | Path,
    out: str | Path,
    split: str = "train",
    index_dir: str | None = None,
    epochs: int = 3,
    learning_rate: float = 1e-3,
    temperature: float = 0.05,
    negatives: int = 30,
    progress: bool | None = None,
) -> dict:
    """Fit a query adapter (retrievers/query_adapter.py) on the labelled queries of one split of a BEIR folder and
    write it to `out` (.npz); returns what was recorded in it (the settings, the counts, the resolved config).
    Score it on another split: `eval-retrieval --set retrieve.retrievers.dense.query_adapter=OUT`."""
    # both checked before minutes of ingest, not after
    check_adapter_path(out)
    check_fit_settings(epochs, learning_rate, temperature, negatives)
    corpus, queries, qrels = load_beir(folder, split)
    with tempfile.TemporaryDirectory(prefix="switchyard-fit-") as tmp:
        stack, index_s = prepare_stack(config, corpus, index_dir or tmp, progress)
        qids = sorted(queries)
        vectors = stack.embedder.run([queries[q] for q in qids])
        examples, skipped = collect_examples(stack.store, dict(zip(qids, vectors)), qrels, negatives)
        t0 = time.perf_counter()
        matrix = fit(examples, epochs=epochs, learning_rate=learning_rate, temperature=temperature)
        meta = {
            "model": stack.config.embedding.model,
            "dim": int(matrix.shape[0]),
            "windows": stack.store.windows,
            "dataset": Path(folder).name,
            "split": split,
            "queries": len(examples),
            "skipped_queries": skipped,
            "epochs": epochs,
            "learning_rate": learning_rate,
            "temperature": temperature,
            "negatives": negatives,
            "fit_s": round(time.perf_counter() - t0, 1),
            "index_s": round(index_s, 1),
            "config": stack.config.model_dump(mode="json"),
        }
        QueryAdapter.save(out, matrix, meta)
    return meta


def evaluate_suite(
    config: SwitchyardConfig,
    folders: list[str | Path],
    split: str = "test",
    index_dir: str | None = None,
    limit: int | None = None,
    progress: bool | None = None,
    variants: dict[str, FusionConfig] | None = None,
) -> dict:
    """`evaluate` on each BEIR folder, plus each configuration's macro average (the unweighted mean over datasets).
    Every folder is checked before any is indexed."""
    names = [Path(f).name for f in folders]
    if len(set(names)) != len(names):
        raise DatasetError(f"two dataset folders have the same name: {sorted(n for n in names if names.count(n) > 1)}")
    for folder in folders:
        load_beir(folder, split)
    datasets = [evaluate(config, f, split, index_dir, limit, progress, variants) for f in folders]
    macro = {
        name: {m: round(sum(d["results"][name][m] for d in datasets) / len(datasets), 4) for m in METRIC_NAMES}
        for name in datasets[0]["results"]
    }
    return {
        "split": split,
        "datasets": datasets,
        "macro": macro,
        "singles": datasets[0]["singles"],
        "default": datasets[0]["default"],
    }


def best_single(result: dict) -> str:
    """The single retriever with the highest nDCG@10 in one `evaluate` result (ties: the first listed)."""
    singles = result["singles"]
    return max(singles, key=lambda n: (result["results"][n]["ndcg@10"], -singles.index(n)))


def default_against_best_single(name: str, result: dict) -> str:
    """One line: the config's own ranking (hybrid, or hybrid+rerank with a reranker) beside the best single
    retriever on nDCG@10 and R@1, with the differences."""
    rows, default, single = result["results"], result["default"], best_single(result)
    cells = [
        f"{label} {rows[default][m]:.4f} vs {rows[single][m]:.4f} ({rows[default][m] - rows[single][m]:+.4f})"
        for m, label in (("ndcg@10", "nDCG@10"), ("recall@1", "R@1"))
    ]
    return f"{name}: {default} vs best single {single}: " + ", ".join(cells)


def format_table(result: dict) -> str:
    cols = list(METRIC_NAMES) + ["query_ms_p50", "query_ms_p95"]
    lines = [
        f"{result['dataset']} ({result['split']}, {result['queries']} queries), index {result['index_s']}s",
        "| configuration | " + " | ".join(cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for name, row in result["results"].items():
        lines.append(
            f"| {name} | " + " | ".join(f"{row[c]:.4f}" if c in METRIC_NAMES else f"{row[c]:.1f}" for c in cols) + " |"
        )
    lines.append(default_against_best_single(result["dataset"], result))
    return "\n".join(lines)


SUITE_METRICS = (("ndcg@10", "nDCG@10"), ("recall@1", "R@1"), ("recall@10", "R@10"), ("mrr@10", "MRR@10"))


def format_suite_table(suite: dict) -> str:
    """One table, configurations x datasets (and the macro average); each cell is nDCG@10 / R@1 / R@10 / MRR@10.
    Then a line per dataset: the default (hybrid, or hybrid+rerank) beside that dataset's best single retriever."""
    datasets = suite["datasets"]
    heads = [f"{d['dataset']} ({d['queries']} q)" for d in datasets] + ["macro average"]
    legend = " / ".join(label for _, label in SUITE_METRICS)
    lines = [
        f"split {suite['split']}; each cell: {legend}",
        "| configuration | " + " | ".join(heads) + " |",
        "|---" * (len(heads) + 1) + "|",
    ]
    for name in suite["macro"]:
        cells = [d["results"][name] for d in datasets] + [suite["macro"][name]]
        lines.append(
            f"| {name} | " + " | ".join(" / ".join(f"{c[m]:.4f}" for m, _ in SUITE_METRICS) for c in cells) + " |"
        )
    lines.append("the default against the best single retriever of each dataset (by nDCG@10):")
    lines += [default_against_best_single(d["dataset"], d) for d in datasets]
    return "\n".join(lines)


def benchmark(
    config: SwitchyardConfig,
    folders: list[str | Path],
    split: str = "test",
    index_dir: str | None = None,
    limit: int | None = None,
    progress: bool | None = None,
    variants: dict[str, FusionConfig] | None = None,
    out: str | Path | None = None,
) -> dict:
    """`switchyard eval-retrieval`: `evaluate` on one BEIR folder, `evaluate_suite` on several; with `out`, the result
    is also written there as JSON. `format_benchmark` prints either."""
    if len(folders) == 1:
        result = evaluate(
            config, folders[0], split=split, index_dir=index_dir, limit=limit, progress=progress, variants=variants
        )
    else:
        result = evaluate_suite(
            config, folders, split=split, index_dir=index_dir, limit=limit, progress=progress, variants=variants
        )
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))
    return result


def format_benchmark(result: dict) -> str:
    """The table of a `benchmark` result: one folder's (`format_table`) or a suite's (`format_suite_table`)."""
    return format_suite_table(result) if "macro" in result else format_table(result)
