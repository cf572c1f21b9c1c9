"""Issue 11 goal 1: which sentence windows to embed, chosen on dev. Finished research: the library kept `tok:64:32`
(docs/benchmarks.md, "Windows swept, soft pooling"); kept here to re-run the sweep.

    .venv/bin/python bench/retrieval_suite.py
    .venv/bin/python bench/fusion_tuning.py cache        # the default collections and the BM25 runs
    .venv/bin/python bench/research/window_sweep.py --dataset scifact --spec tok:64:32 --spec sent:2:1 [--split dev]
    .venv/bin/python bench/research/window_sweep.py --dataset scifact --spec tok:64:32 --pool lse:0.01 --pool lse:0.05
    .venv/bin/python bench/research/window_sweep.py --dataset hotpot-single --spec long:64 --spec long:128 \
        --only "zscore 0.5/0.5" --metric recall@1              # windows only for chunks longer than N tokens

A spec is `tok:T:O` (the library's SentenceWindows: whole sentences up to T tokens, O tokens of overlap),
`sent:K:S` (K consecutive sentences, a new window every S sentences) or `long:N` (length-aware windows: the default
collection's stored windows for chunks longer than N tokens, the chunk's own vector for the others; nothing is
embedded, and `long:64` is the library's default). The chunks come from the default collection (same chunking,
same titles); each `tok` / `sent` spec's window vectors are embedded once with the configured embedder and cached
under bench/out/window-sweep/. Dense search is exact (every window scored against the query, a chunk scored by its
best window), its top 200 chunks are fused with the cached BM25 run under each fusion setting of a small grid, and
--metric (nDCG@10) of dense alone (per spec) and a table of every (windows, fusion) pair by macro are printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py and fusion_tuning.py
from common import ROOT  # noqa: E402
from fusion_tuning import SUITE, dense_run, load, paired_p, per_query  # noqa: E402

from switchyard.configs.loader import load_config
from switchyard.configs.schema import FusionConfig
from switchyard.evaluation.ranking import METRIC_NAMES
from switchyard.evaluation.retrieval import load_beir, prepare_stack
from switchyard.retrievers.chunking import SentenceWindows, _token_counter
from switchyard.retrievers.documents import search_text
from switchyard.retrievers.store import WINDOW_COLUMN
from switchyard.run_context import ALL

OUT = ROOT / "bench" / "out" / "window-sweep"


def splitter(spec: str, tokenizer_file: str):
    kind, a, b = spec.split(":")
    a, b = int(a), int(b)
    if kind == "tok":
        windows = SentenceWindows(a, b, tokenizer_file)
        return lambda title, text: windows._splitter.split_text(text) or [text]
    if kind == "sent":
        from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer

        sentences = split_by_sentence_tokenizer()

        def run(title: str, text: str) -> list[str]:
            s = [x.strip() for x in sentences(text) if x.strip()] or [text]
            starts = range(0, max(len(s) - a, 0) + 1, b)
            out = [" ".join(s[i : i + a]) for i in starts]
            if (len(s) - a) % b and len(s) > a:  # the tail
                out.append(" ".join(s[-a:]))
            return out

        return run
    raise SystemExit(f"unknown spec {spec!r}")


def stored_windows(spec: str, rows: list[dict], stack, tokenizer_file: str):
    """`long:N`: the collection's own window vectors for chunks longer than N tokens (as SentenceWindows counts
    them: the chunk text, no title), the chunk vector for the others."""
    limit = int(spec.split(":")[1])
    count = _token_counter(tokenizer_file)
    table = stack.store.scan(["chunk_id", "vector", WINDOW_COLUMN], scope=ALL).to_pydict()
    stored = dict(zip(table["chunk_id"], zip(table["vector"], table[WINDOW_COLUMN])))
    vectors, owner = [], []
    for i, row in enumerate(rows):
        own, windows = stored[row["chunk_id"]]
        chosen = windows if len(count(row["text"])) > limit else [own]
        vectors.extend(chosen)
        owner.extend([i] * len(chosen))
    return np.asarray(vectors, dtype=np.float32), np.asarray(owner)


def window_vectors(name: str, spec: str, rows: list[dict], stack, tokenizer_file: str):
    if spec.startswith("long:"):
        return stored_windows(spec, rows, stack, tokenizer_file)
    cache = OUT / f"{name}-{spec.replace(':', '_')}.npz"
    if cache.exists():
        z = np.load(cache)
        return z["vectors"], z["owner"]
    split = splitter(spec, tokenizer_file)
    texts, owner = [], []
    for i, row in enumerate(rows):
        for piece in split(row["title"], row["text"]):
            texts.append(search_text(row["title"], piece))
            owner.append(i)
    t0 = time.perf_counter()
    vectors = stack.embedder.run(texts).astype(np.float32)
    print(
        f"{name} {spec}: {len(texts)} windows for {len(rows)} chunks ({len(texts) / len(rows):.2f} per chunk) "
        f"embedded in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=vectors, owner=np.asarray(owner))
    return vectors, np.asarray(owner)


def fusion_grid(extra: list[str]) -> dict[str, dict]:
    grid = {
        f"{n} {b}/{round(1 - b, 1)}": dict(normalization=n, weights={"bm25": b, "dense": round(1 - b, 1)})
        for n in ("zscore", "max", "minmax")
        for b in (0.4, 0.5, 0.6)
    }
    grid.update({f: json.loads(f) for f in extra})
    return {k: FusionConfig(**v).model_dump() for k, v in grid.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--dataset", action="append", required=True)
    ap.add_argument("--spec", action="append", required=True)
    ap.add_argument(
        "--pool",
        action="append",
        default=None,
        help="how a chunk's window scores combine: max (the library's), lse:TAU (soft maximum)",
    )
    ap.add_argument("--split", default="dev", choices=["dev", "test"])
    ap.add_argument("--metric", default="ndcg@10", choices=METRIC_NAMES)
    ap.add_argument(
        "--fusion",
        action="append",
        default=[],
        metavar="JSON",
        help="more fusion settings to score (FusionConfig fields as JSON) beside the grid",
    )
    ap.add_argument(
        "--only",
        action="append",
        default=None,
        metavar="NAME",
        help="score only these fusion settings (grid names or JSON given with --fusion)",
    )
    args = ap.parse_args()
    metric = args.metric
    suite = Path(args.suite)
    pools = args.pool or ["max"]
    fusions = fusion_grid(args.fusion)
    if args.only:
        fusions = {k: v for k, v in fusions.items() if k in args.only}
    config = load_config(None, [])
    data = load(suite)
    # (spec pool, setting) -> dataset -> per-query nDCG@10; singles: dataset -> retriever -> per-query
    results: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    singles: dict[str, dict[str, np.ndarray]] = {}
    for name in args.dataset:
        corpus, _, _ = load_beir(suite / name, "dev")
        stack, _ = prepare_stack(config, corpus, str(suite / "index"))
        rows = stack.store.scan(["chunk_id", "doc_id", "title", "text"], scope=ALL).to_pylist()
        run = data[name]
        qids = list(run["qrels"][args.split])
        Q = np.stack([run["runs"]["qvec"][q] for q in qids]).astype(np.float32)
        singles[name] = {"bm25": per_query(run, args.split, "bm25", metric)}
        print(f"{name} {args.split}: bm25 {singles[name]['bm25'].mean():.4f}", flush=True)
        for spec in args.spec:
            vectors, owner = window_vectors(name, spec, rows, stack, stack.embedder.tokenizer_file)
            for pool in pools:
                label = f"{spec} {pool}"
                dense = dense_run(
                    ([r["chunk_id"] for r in rows], [r["doc_id"] for r in rows]), vectors, owner, qids, Q, pool
                )
                view = {"runs": {"dense": dense, "bm25": run["runs"]["bm25"]}, "qrels": run["qrels"]}
                singles[name][label] = per_query(view, args.split, "dense", metric)
                for setting, fc in fusions.items():
                    results.setdefault((label, setting), {})[name] = per_query(view, args.split, fc, metric)
                print(
                    f"  {label}: {len(owner) / len(rows):.2f} windows per chunk, dense "
                    f"{singles[name][label].mean():.4f}",
                    flush=True,
                )
    names = list(args.dataset)
    print(
        f"\n{args.split} {metric}; margin: worst over datasets of (fused - better single retriever), "
        "p: paired randomization of that worst difference"
    )
    print("| windows | fusion | " + " | ".join(names) + " | macro | margin (p) |")
    print("|---" * (len(names) + 4) + "|")
    ranked = []
    for (label, setting), per in results.items():
        if set(per) != set(names):
            continue
        diffs = {n: per[n] - max((singles[n]["bm25"], singles[n][label]), key=np.mean) for n in names}
        worst = min(names, key=lambda n: diffs[n].mean())
        ranked.append((np.mean([per[n].mean() for n in names]), label, setting, per, diffs[worst]))
    for macro, label, setting, per, worst in sorted(ranked, key=lambda r: -r[0]):
        print(
            f"| {label} | {setting} | "
            + " | ".join(f"{per[n].mean():.4f}" for n in names)
            + f" | {macro:.4f} | {worst.mean():+.4f} ({paired_p(worst):.3f}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
