"""Issue 11 goal 1: query adapters (retrievers/query_adapter.py) fitted on each suite dataset's dev queries.

    .venv/bin/python bench/retrieval_suite.py
    .venv/bin/python bench/fusion_tuning.py cache                  # collections, BM25 runs, query vectors
    .venv/bin/python bench/query_adapter.py cv                     # the fit settings, 2-fold CV on dev only
    .venv/bin/python bench/query_adapter.py test --epochs 3 --learning-rate 0.001   # fit on all of dev, score test

`cv` fits an adapter on half of a dataset's dev queries and scores the other half (and the other way round), for
each setting of a small grid, printing dense and hybrid (the shipped fusion) nDCG@10 with and without it. `test`
fits one adapter per dataset on its whole dev split with the given setting, scores the test split, and splits the
test queries by whether a dev query shares a relevant document with them (what an adapter can memorise) or not.
Dense search here is exact (numpy, as LanceDB's flat search over the same vectors); the library path is the same
`collect_examples` / `fit` / `apply_adapter` (`cli.py fit-adapter`). Prints: `cv`, dense and hybrid nDCG@10 per
dataset and setting, then the settings ranked by macro hybrid nDCG@10; `test`, a Markdown table per dataset and
slice (all / seen / not seen) with paired randomization p-values, recorded in bench/results/query_adapter.json
(docs/benchmarks.md's table is generated from it; the adapters stay in memory).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import results
from fusion_tuning import SUITE, dense_run, load, paired_p, per_query

from switchyard.configs.loader import load_config
from switchyard.configs.schema import FusionConfig
from switchyard.evaluation.retrieval import load_beir, prepare_stack
from switchyard.retrievers.query_adapter import apply_adapter, collect_examples, fit
from switchyard.retrievers.store import ChunkFetch
from switchyard.run_context import ALL

NAMES = ("scifact", "hotpotqa", "phantomwiki")
METRIC = "ndcg@10"
GRID = list(itertools.product((2, 3, 4, 6), (5e-4, 1e-3)))


class Dataset:
    """One suite dataset: its default collection (windows), cached runs and query vectors, and the exact dense
    search over every searched vector."""

    def __init__(self, suite: Path, name: str, run: dict):
        corpus, _, _ = load_beir(suite / name, "dev")
        self.stack, _ = prepare_stack(load_config(None, []), corpus, str(suite / "index"))
        self.run = run
        self._examples: dict[tuple, list] = {}
        vectors = ChunkFetch(self.stack.store).dense_vectors(
            chunk_ids=self.stack.store.scan(["chunk_id"], scope=ALL)["chunk_id"].to_pylist()
        )
        self.ids = list(vectors)
        self.docs = [vectors[c][0] for c in self.ids]
        self.owner = np.concatenate([np.full(len(vectors[c][1]), i) for i, c in enumerate(self.ids)])
        self.vectors = np.concatenate([vectors[c][1] for c in self.ids])

    def fit(self, qids: list[str], split: str, epochs: int, learning_rate: float) -> np.ndarray:
        key = (split, tuple(qids))
        if key not in self._examples:  # the same queries' examples serve every setting of the grid
            self._examples[key], _ = collect_examples(
                self.stack.store, {q: self.run["runs"]["qvec"][q] for q in qids}, self.run["qrels"][split]
            )
        return fit(self._examples[key], epochs=epochs, learning_rate=learning_rate)

    def scores(self, qids: list[str], split: str, adapter: np.ndarray | None) -> dict[str, np.ndarray]:
        """Per-query nDCG@10 of dense and hybrid (the default fusion) on `qids`, the query vectors adapted or not."""
        Q = np.stack([self.run["runs"]["qvec"][q] for q in qids]).astype(np.float32)
        if adapter is not None:
            Q = apply_adapter(adapter, Q)
        dense = dense_run((self.ids, self.docs), self.vectors, self.owner, qids, Q, "max")
        view = {
            "runs": {"dense": dense, "bm25": self.run["runs"]["bm25"]},
            "qrels": {"q": {q: self.run["qrels"][split][q] for q in qids}},
        }
        return {
            "dense": per_query(view, "q", "dense", METRIC),
            "hybrid": per_query(view, "q", FusionConfig().model_dump(), METRIC),
        }


def cv(suite: Path, names: list[str]) -> None:
    data = load(suite)
    table: dict[tuple, list[float]] = {}
    for name in names:
        ds = Dataset(suite, name, data[name])
        dev = sorted(ds.run["qrels"]["dev"])
        order = np.random.default_rng(0).permutation(len(dev))
        folds = [[dev[i] for i in order[j::2]] for j in range(2)]
        base = [ds.scores(f, "dev", None) for f in folds]
        cells = {k: np.concatenate([b[k] for b in base]).mean() for k in ("dense", "hybrid")}
        print(
            f"{name} dev ({len(dev)} q), no adapter: dense {cells['dense']:.4f}, hybrid {cells['hybrid']:.4f}",
            flush=True,
        )
        for epochs, lr in GRID:
            t0 = time.perf_counter()
            res = [ds.scores(folds[j], "dev", ds.fit(folds[1 - j], "dev", epochs, lr)) for j in range(2)]
            cells = {k: np.concatenate([r[k] for r in res]).mean() for k in ("dense", "hybrid")}
            table.setdefault((epochs, lr), []).append(cells["hybrid"])
            print(
                f"  epochs {epochs}, learning rate {lr:g}: dense {cells['dense']:.4f}, hybrid {cells['hybrid']:.4f}"
                f" ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    print(f"\nhybrid {METRIC}, 2-fold CV on dev, macro over {', '.join(names)}:")
    for (epochs, lr), vals in sorted(table.items(), key=lambda kv: -np.mean(kv[1])):
        print(f"  epochs {epochs}, learning rate {lr:g}: {np.mean(vals):.4f}")


def test(suite: Path, names: list[str], epochs: int, learning_rate: float) -> dict:
    data = load(suite)
    figures: dict[str, dict] = {}
    print(
        f"test {METRIC}; adapter fitted on each dataset's whole dev split (epochs {epochs}, learning rate "
        f"{learning_rate:g}); p: paired randomization, 10,000 sign flips"
    )
    print(
        "| dataset | queries | bm25 | dense | dense + adapter | hybrid (default) | hybrid + adapter | "
        "hybrid + adapter − default (p) | − better single (p) |"
    )
    print("|---" * 9 + "|")
    for name in names:
        ds = Dataset(suite, name, data[name])
        dev_docs = {d for rel in ds.run["qrels"]["dev"].values() for d, g in rel.items() if g > 0}
        adapter = ds.fit(sorted(ds.run["qrels"]["dev"]), "dev", epochs, learning_rate)
        qids = sorted(ds.run["qrels"]["test"])
        seen = np.array([any(d in dev_docs for d, g in ds.run["qrels"]["test"][q].items() if g > 0) for q in qids])
        bm25 = per_query(
            {"runs": ds.run["runs"], "qrels": {"q": {q: ds.run["qrels"]["test"][q] for q in qids}}}, "q", "bm25", METRIC
        )
        base, adapted = ds.scores(qids, "test", None), ds.scores(qids, "test", adapter)
        for label, mask in (
            ("all", np.ones(len(qids), bool)),
            ("relevant doc seen in dev", seen),
            ("not seen in dev", ~seen),
        ):
            if not mask.any():
                continue
            b, d, da, h, ha = (
                x[mask] for x in (bm25, base["dense"], adapted["dense"], base["hybrid"], adapted["hybrid"])
            )
            best = max((b, da), key=np.mean)
            figures.setdefault(name, {})[label] = {
                "queries": int(mask.sum()),
                **{k: round(float(x.mean()), 4) for k, x in zip(_COLUMNS, (b, d, da, h, ha))},
                "vs_default": {"diff": round(float((ha - h).mean()), 4), "p": round(paired_p(ha - h), 4)},
                "vs_best_single": {"diff": round(float((ha - best).mean()), 4), "p": round(paired_p(ha - best), 4)},
            }
            print(
                f"| {name}, {label} | {mask.sum()} | {b.mean():.4f} | {d.mean():.4f} | {da.mean():.4f} | "
                f"{h.mean():.4f} | {ha.mean():.4f} | {(ha - h).mean():+.4f} ({paired_p(ha - h):.3f}) | "
                f"{(ha - best).mean():+.4f} ({paired_p(ha - best):.3f}) |",
                flush=True,
            )
    return figures


_COLUMNS = ("bm25", "dense", "dense_adapter", "hybrid", "hybrid_adapter")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["cv", "test"])
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument("--dataset", action="append", choices=NAMES, help="default: all three")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    args = ap.parse_args()
    names = args.dataset or list(NAMES)
    if args.step == "cv":
        cv(Path(args.suite), names)
    else:
        figures = test(Path(args.suite), names, args.epochs, args.learning_rate)
        config = {"datasets": names, "epochs": args.epochs, "learning_rate": args.learning_rate, "metric": METRIC}
        print(f"recorded {results.record('query_adapter', figures, config)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
