"""Issue 61 goals 3-4: the cross-encoder over the default hybrid's candidates, on the retrieval suite.

    .venv/bin/python bench/train_reranker.py          # the model, and the suite's dev-tune splits (qrels/dev-tune.tsv)
    .venv/bin/python bench/tune_reranker.py score --split dev-tune     # fused lists + cross-encoder logits, cached
    .venv/bin/python bench/tune_reranker.py grid --split dev-tune      # N x fused_weight: choose them here
    .venv/bin/python bench/tune_reranker.py score --split test
    .venv/bin/python bench/tune_reranker.py report --split test --n 20 --fused-weight 0.7 --result cross_encoder_test

`score` runs each query of a split through the default configuration's retrievers and fusion (evaluation/retrieval.py
`QueryRanker`, the path `eval-retrieval` measures), keeps the BM25, dense and fused document rankings and scores the
first `--depth` fused passages with the cross-encoder (`--model`, default the shipped file). Everything a split
needs is cached in one file, `OUT/<split>.json.gz`, written after each dataset (a second run scores only the datasets
it lacks). `grid` reranks the first N fused passages by `(1 - w) * minmax(logit) + w * minmax(fused)` (as
`rerank.fused_weight` does; w = 1 is the fused order) for every N and w, prints nDCG@10 per dataset, the macro
average and the cells below the best single list beyond noise, and chooses by issue 75's third rule (`cmd_grid`).
`report` prints, for one (N, w), nDCG@10 and R@1 of BM25, dense, the fused default and the reranked
default per dataset, with paired sign-flip p-values (evaluation/stats.py, 9,999 resamples) against the fused default
and against the best single retriever of that dataset. Choose N and w on dev-tune only; test is read once, with the
choice fixed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np
import results
from common import ROOT
from fusion_tuning import significant_losses

from switchyard.configs.loader import load_config
from switchyard.evaluation.ranking import dedupe, score_query
from switchyard.evaluation.retrieval import EVAL_DEPTH, QueryRanker, load_beir, prepare_stack
from switchyard.evaluation.stats import sign_flip_pvalue
from switchyard.retrievers.cross_encoder_onnx import OnnxCrossEncoder
from switchyard.retrievers.documents import search_text
from switchyard.retrievers.rerankers import blend, shipped_cross_encoder

SUITE = ROOT / "bench" / "out" / "retrieval-suite"
OUT = ROOT / "bench" / "out" / "reranker-tune"
DATASETS = (
    *("scifact", "hotpotqa", "hotpot-single", "phantomwiki", "squad-intros", "squad-low-overlap", "nq-toy"),
    *("nq-open", "clapnq", "mtrag-clapnq", "mtrag-fiqa"),  # the natural-question sets (bench/natural_sets.py)
)
NS = (5, 10, 20)  # at most retrieve.top_k (20): the candidates `ask` already has
WEIGHTS = tuple(round(w, 2) for w in np.arange(0, 1.01, 0.1))
SINGLES = ("bm25", "dense")
METRICS = ("ndcg@10", "recall@1")


def sample(qids: list[str], limit: int | None) -> list[str]:
    """The first `limit` query ids in sorted order (all when None): a fixed subset, the same on every run."""
    return sorted(qids)[:limit] if limit else sorted(qids)


def score_dataset(name: str, split: str, suite: Path, model: OnnxCrossEncoder, depth: int, limit: int | None) -> dict:
    corpus, queries, qrels = load_beir(suite / name, split)
    stack, _ = prepare_stack(load_config(None), corpus, str(suite / "index"))
    ranker = QueryRanker(stack)
    ranker.warm_up()
    rows = []
    t_retrieve = t_score = 0.0
    for qid in sample(list(queries), limit):
        t0 = time.perf_counter()
        rankings, _ = ranker.rank(queries[qid])
        t1 = time.perf_counter()
        head = rankings["hybrid"][:depth]
        logits = model.predict([(queries[qid], search_text(p.title, p.text)) for p in head]) if head else []
        t_score += time.perf_counter() - t1
        t_retrieve += t1 - t0
        rows.append(
            {
                "qid": qid,
                "qrels": qrels[qid],
                "head_docs": [p.doc_id for p in head],
                "head_fused": [round(float(p.score), 6) for p in head],
                "head_logits": [round(float(x), 5) for x in logits],
                **{k: dedupe([p.doc_id for p in rankings[k]])[:EVAL_DEPTH] for k in (*SINGLES, "hybrid")},
            }
        )
    pairs = sum(len(r["head_docs"]) for r in rows)
    print(
        f"  {name}: {len(rows)} queries, retrieval {t_retrieve:.0f} s, {pairs} pairs scored in {t_score:.0f} s "
        f"({pairs / max(t_score, 1e-9):.1f} pairs/s)",
        flush=True,
    )
    return {"queries": rows, "of": len(queries)}


def reranked(row: dict, n: int, weight: float) -> list[str]:
    """The document ranking the default gives with the first n fused passages reranked (weight: fused_weight)."""
    head_docs, fused, logits = row["head_docs"][:n], row["head_fused"][:n], row["head_logits"][:n]
    scores = blend(logits, 1 - weight, fused, weight)
    order = sorted(range(len(head_docs)), key=lambda i: -scores[i])  # stable: ties keep the fused order
    # then the fused documents not in the head, in their order
    return dedupe([head_docs[i] for i in order] + row["hybrid"])[:EVAL_DEPTH]


def metric(rows: list[dict], rank, name: str) -> np.ndarray:
    return np.array([score_query(rank(r), r["qrels"])[name] for r in rows])


def load(out: Path, split: str) -> dict:
    path = out / f"{split}.json.gz"
    return json.loads(gzip.decompress(path.read_bytes())) if path.exists() else {"datasets": {}}


def cmd_score(args) -> int:
    path = args.out / f"{args.split}.json.gz"
    data = load(args.out, args.split)
    model_path, digest = (args.model, None) if args.model else shipped_cross_encoder()
    settings = {"model": str(model_path), "depth": args.depth, "limit": args.limit}
    cached = {k: data[k] for k in settings if k in data}
    if data["datasets"] and cached != settings:  # one file holds one model's scores
        sys.exit(f"{path} was scored with {cached}, not {settings}: give another --out")
    data.update(settings)
    model = OnnxCrossEncoder(model_path, sha256=digest, threads=args.threads)
    model.warm_up()
    for name in args.datasets:
        if name in data["datasets"]:
            print(f"  {name}: cached in {path}")
            continue
        if not (args.suite / name / "qrels" / f"{args.split}.tsv").exists():
            print(f"  {name}: no qrels/{args.split}.tsv, skipped")
            continue
        data["datasets"][name] = score_dataset(name, args.split, args.suite, model, args.depth, args.limit)
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(json.dumps(data).encode(), mtime=0))
    return 0


def cmd_grid(args) -> int:
    """Every (N, w), chosen by issue 75's third rule, fixed before this grid was read: a candidate must not be below
    the dataset's best single list (BM25 or dense) beyond noise (paired sign flips, p < 0.05) on nDCG@10 or R@1 on
    any set; among those, the highest macro nDCG@10. The fused default (w = 1) is a candidate like any other."""
    data = load(args.out, args.split)["datasets"]
    names = [n for n in DATASETS if n in data and n != "nq-toy"]  # nq-toy: 2 queries, a smoke test
    if not names:
        sys.exit(f"nothing scored in {args.out / args.split}.json.gz: run `score --split {args.split}` first")
    rows = {n: data[n]["queries"] for n in names}
    singles = {(n, m): [metric(rows[n], lambda r, k=k: r[k], m) for k in SINGLES] for n in names for m in METRICS}
    best_single = {key: max(lists, key=np.mean) for key, lists in singles.items()}
    print(f"nDCG@10 on {args.split}, the first N fused passages reranked, w = rerank.fused_weight (1: fused order);")
    print("losses: (set, metric) cells below the best single list with p < 0.05\n")
    print("| N | w | " + " | ".join(names) + " | macro | losses |")
    print("|---|---|" + "---|" * (len(names) + 2))
    candidates = [(NS[-1], 1.0)] + [(n_, w) for n_ in NS for w in WEIGHTS[:-1]]
    chosen = None
    for n_, w in candidates:
        per = {(n, m): metric(rows[n], lambda r, n_=n_, w=w: reranked(r, n_, w), m) for n in names for m in METRICS}
        losses = significant_losses(
            {f"{n} {m}": v for (n, m), v in per.items()},
            {f"{n} {m}": v for (n, m), v in best_single.items()},
            pvalue=sign_flip_pvalue,
        )
        macro = float(np.mean([per[n, "ndcg@10"].mean() for n in names]))
        label = "- | 1.0" if w == 1.0 else f"{n_} | {w}"
        cells = " | ".join(f"{per[n, 'ndcg@10'].mean():.4f}" for n in names)
        print(f"| {label} | {cells} | {macro:.4f} | {', '.join(losses) or 'none'} |", flush=True)
        if not losses and (chosen is None or macro > chosen[0]):
            chosen = (macro, label)
    if chosen is None:
        print("\nno candidate is free of losses beyond noise: nothing to choose")
        return 1
    print(f"\nchosen (no loss beyond noise, then macro nDCG@10): N | w = {chosen[1]}, macro {chosen[0]:.4f}")
    return 0


def cmd_report(args) -> int:
    data = load(args.out, args.split)["datasets"]
    names = [n for n in DATASETS if n in data]
    out: dict = {"split": args.split, "n": args.n, "fused_weight": args.fused_weight, "datasets": {}}
    for m, label in (("ndcg@10", "nDCG@10"), ("recall@1", "R@1")):
        print(
            f"\n{label} on {args.split}; reranked = the first {args.n} fused passages by the cross-encoder, "
            f"fused_weight {args.fused_weight}; p: paired sign flips\n"
        )
        print(
            "| dataset (queries) | bm25 | dense | fused (today's default) | **reranked** | Δ vs fused (p) | "
            "Δ vs best single (p) |"
        )
        print("|---|---|---|---|---|---|---|")
        for name in names:
            rows = data[name]["queries"]
            per = {k: metric(rows, lambda r, k=k: r[k], m) for k in (*SINGLES, "hybrid")}
            per["reranked"] = metric(rows, lambda r: reranked(r, args.n, args.fused_weight), m)
            single = max(SINGLES, key=lambda k: per[k].mean())
            d_fused, d_single = per["reranked"] - per["hybrid"], per["reranked"] - per[single]
            p_fused, p_single = sign_flip_pvalue(d_fused), sign_flip_pvalue(d_single)
            print(
                f"| {name} ({len(rows)}) | {per['bm25'].mean():.4f} | {per['dense'].mean():.4f} | "
                f"{per['hybrid'].mean():.4f} | **{per['reranked'].mean():.4f}** | "
                f"{d_fused.mean():+.4f} ({p_fused:.3f}) | "
                f"{d_single.mean():+.4f} vs {single} ({p_single:.3f}) |"
            )
            out["datasets"].setdefault(name, {})[m] = {
                **{k: round(float(v.mean()), 4) for k, v in per.items()},
                "best_single": single,
                "p_vs_fused": round(p_fused, 4),
                "p_vs_single": round(p_single, 4),
            }
            out["datasets"][name]["queries"] = len(rows)
        macro = {k: np.mean([out["datasets"][n][m][k] for n in names]) for k in ("bm25", "dense", "hybrid", "reranked")}
        print(
            f"| macro | {macro['bm25']:.4f} | {macro['dense']:.4f} | {macro['hybrid']:.4f} | "
            f"**{macro['reranked']:.4f}** | {macro['reranked'] - macro['hybrid']:+.4f} | |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.result:
        scored = load(args.out, args.split)
        config = {
            "n": args.n,
            "fused_weight": args.fused_weight,
            "model": scored.get("model"),
            "depth": scored.get("depth"),
        }
        print(f"recorded {results.record(args.result, out, config).relative_to(ROOT)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("score", "grid", "report"))
    ap.add_argument("--split", default="dev-tune")
    ap.add_argument("--suite", type=Path, default=SUITE)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--model", help="a cross-encoder .onnx file (default: the shipped one)")
    ap.add_argument("--depth", type=int, default=max(NS), help="fused passages scored per query")
    ap.add_argument("--limit", type=int, help="queries per dataset (the first in id order)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=20, help="report: fused passages reranked")
    ap.add_argument("--fused-weight", type=float, default=0.0, help="report: rerank.fused_weight")
    ap.add_argument("--json", help="report: also write the figures here")
    ap.add_argument("--result", help="report: also record the figures as bench/results/RESULT.json (the docs' table)")
    args = ap.parse_args()
    return {"score": cmd_score, "grid": cmd_grid, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
