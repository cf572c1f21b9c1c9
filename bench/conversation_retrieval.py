"""Follow-up questions on MTRAG (clapnq + fiqa): retrieval of each user turn with the history-aware `terms` step
(nodes/follow_up.py) against the question alone, all questions so far and the human rewrite.

    .venv/bin/python bench/conversation_retrieval.py --split dev                      # the configured step
    .venv/bin/python bench/conversation_retrieval.py --split dev --set conversation.terms=8
    .venv/bin/python bench/conversation_retrieval.py --split dev --grid               # the built-in grid, dev only
    .venv/bin/python bench/conversation_retrieval.py --split dev --set conversation.max_words=2
    .venv/bin/python bench/conversation_retrieval.py --split test                     # once, at the end

Data: ../shared/datasets/mtrag-clapnq-fiqa (turns.jsonl, passages.jsonl). Each domain is indexed as its own
collection with the project's default config (`load_config()`, plus any `--set`) through the real ingest (chunks,
sentence windows), under bench/out/conversation-retrieval/index (git-ignored; an unchanged corpus is found, not
re-ingested).

Split (by conversation, never by turn): bench/conversation_sets.py's `split_of` (per domain, conversations sorted by
the hex sha1 of their id, the first ceil(n/2) `dev`: clapnq 15 / 14, fiqa 14 / 13 conversations). Tune on dev; score
test once.

A turn is scored when it has gold passages (unanswerable / conversational turns have none). Retrieval is the
pipeline's: `Retrieval.run(queries, run=RunContext())` (hybrid BM25 + dense per query, several queries fused by RRF,
`retrieve.top_k` chunks), no reranker; a chunk's hit maps to its passage (doc id), first rank kept. Metrics:
recall@5 and nDCG@10 of the passage ids. Query methods:

- `last`: the question alone (the floor);
- `all`: every user question so far, this one included, concatenated;
- `rewrite`: the human standalone rewrite (the question when it is null; the target);
- `rewrite+last`: the rewrite and the question, fused (the moonshot);
- `terms`: `follow_up_queries(question, history, config.conversation)`; with `--grid`, one `terms[...]` per setting.

Cells: domain x turn kind (`multi_turn`: N/A = first turn, Follow-up, Clarification; a turn listing several kinds
counts in each) and FU+CL (follow-up and clarification turns). Each method's cell reads `mean (vs rewrite / vs
last)`. p: two-sided paired randomization (sign-flip) test over turns (evaluation/stats.py `sign_flip_pvalue`,
9,999 resamples, seed 0) of terms - rewrite and terms - last on the FU+CL turns.

Single-query rankings are cached in memory (and on disk beside the index: bench/out/conversation-retrieval/cache/),
and several queries are fused from them with the same `reciprocal_rank_fusion(k=retrieve.fusion.rrf_k)` injection policy
and top-k cut that `Retrieval.run` applies (the timing pass checks the result against `Retrieval.run` on the index). Overhead: p50 of `follow_up_queries` itself, and p50 of one uncached
`Retrieval.run` with 1 query and with the 2 fused queries the step returns (query-vector cache cleared each time).
Writes one JSON file per run (`--out`, default bench/out/conversation-retrieval/<split>-<method>.json).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import pickle
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from common import ROOT, SHARED
from conversation_sets import conversation_id, split_of

from switchyard.configs.loader import load_config
from switchyard.configs.schema import ConversationConfig
from switchyard.conversation import Message, as_history
from switchyard.evaluation.ranking import dedupe, ndcg_at_k, percentile, recall_at_k
from switchyard.evaluation.stats import sign_flip_pvalue
from switchyard.nodes.contextualize import standalone_question
from switchyard.nodes.follow_up import follow_up_queries
from switchyard.nodes.resources import SharedModels
from switchyard.retrievers.fusion import reciprocal_rank_fusion
from switchyard.retrievers.injection import apply_policy
from switchyard.retrievers.stack import RetrievalStack, corpus_collection_for
from switchyard.run_context import RunContext

DATA = SHARED / "mtrag-clapnq-fiqa"
OUT = ROOT / "bench" / "out" / "conversation-retrieval"
DOMAINS = ("clapnq", "fiqa")
KINDS = ("N/A", "Follow-up", "Clarification")
FUCL = "FU+CL"
BASELINES = ("last", "all", "rewrite", "rewrite+last")
METRICS = ("recall@5", "ndcg@10")
# --grid: the knobs of ConversationConfig (every combination), on top of the config's own conversation section
# (max_words: a knob nodes/follow_up.py reads when the config has it; None = carry into every question)
GRID = {
    "max_words": [1, 2, None],
    "turns": [1, 2, 3],
    "terms": [3, 6, 10],
    "decay": [0.5, 1.0],
    "answer_terms": [0, 2],
    "fuse": [True, False],
}


# -- data ---------------------------------------------------------------------------------------------------------
def load_turns(split: str) -> list[dict]:
    turns = [json.loads(line) for line in (DATA / "turns.jsonl").read_text().splitlines() if line.strip()]
    which = split_of(turns)
    return [t for t in turns if split == "all" or which[conversation_id(t["task_id"])] == split]


def write_corpora() -> dict[str, Path]:
    """passages.jsonl as one BEIR corpus.jsonl per domain (rewritten only when its content changes)."""
    docs: dict[str, list[str]] = defaultdict(list)
    for line in (DATA / "passages.jsonl").read_text().splitlines():
        if line.strip():
            p = json.loads(line)
            domain = next(d for d in DOMAINS if f"-{d}-" in p["collection"])
            docs[domain].append(json.dumps({"_id": p["id"], "title": p["title"], "text": p["text"]}))
    paths = {}
    for domain in DOMAINS:
        path = OUT / "corpus" / domain / "corpus.jsonl"
        text = "\n".join(docs[domain]) + "\n"
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        paths[domain] = path
    return paths


# -- queries ------------------------------------------------------------------------------------------------------
def baseline_queries(method: str, turn: dict, history: list[Message]) -> list[str]:
    question = turn["question"].strip()
    rewrite = (turn["rewrite"] or "").strip() or question
    if method == "last":
        return [question]
    if method == "all":
        return [" ".join([*(m.content for m in history if m.role == "user"), question])]
    if method == "rewrite":
        return [rewrite]
    if method == "rewrite+last":
        return list(dict.fromkeys([rewrite, question]))
    raise ValueError(method)


def grid_configs(base: ConversationConfig) -> dict[str, ConversationConfig]:
    out = {}
    for values in itertools.product(*GRID.values()):
        knobs = dict(zip(GRID, values))
        name = "terms[" + ",".join(f"{k}={v}" for k, v in knobs.items()) + "]"
        out[name] = base.model_copy(update=knobs)
    return out


# -- retrieval ----------------------------------------------------------------------------------------------------
class Searcher:
    """One domain's stack; single-query rankings cached, several queries fused as `Retrieval.run` fuses them."""

    def __init__(self, config, corpus: Path, domain: str, embedder=None):
        cfg = config.model_copy(deep=True)
        cfg.store.uri = str(OUT / "index")
        cfg.store.collection = corpus_collection_for(cfg, [corpus], prefix=f"mtrag-{domain}")
        self.stack = RetrievalStack(cfg, embedder=embedder)
        t0 = time.perf_counter()
        report = self.stack.ingestor().run([corpus])
        self.ingest_s = time.perf_counter() - t0
        self.ingested = report.ingested
        self.retrieval = self.stack.retrieval
        self.cache_path = OUT / "cache" / f"{cfg.store.collection}-{_config_key(cfg)}.pkl"
        self.cache: dict[str, list] = pickle.loads(self.cache_path.read_bytes()) if self.cache_path.exists() else {}
        self.new = 0

    def one(self, query: str) -> list:
        if query not in self.cache:
            self.cache[query] = self.retrieval.run([query], run=RunContext())
            self.new += 1
        return self.cache[query]

    def run(self, queries: list[str]) -> list:
        """What `Retrieval.run(queries)` returns: a single query's list is its own (already under the injection
        policy and cut to top-k); several are fused by RRF, the policy applied to the fused list, then cut."""
        if len(queries) == 1:
            return self.one(queries[0])
        r = self.retrieval
        fused = reciprocal_rank_fusion({f"q{i}": self.one(q) for i, q in enumerate(queries)}, k=r.rrf_k)
        return apply_policy(fused, r.injection_policy, r.injection_threshold)[: r.top_k]

    def save(self) -> None:
        if self.new:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            self.cache_path.write_bytes(pickle.dumps(self.cache))
            self.new = 0


def _config_key(cfg) -> str:
    """The retrieval settings a cached ranking depends on (beyond the collection)."""
    blob = json.dumps(cfg.retrieve.model_dump(mode="json"), sort_keys=True).encode()
    return hashlib.sha1(blob).hexdigest()[:10]


def score(passages: list, gold: list[str]) -> dict[str, float]:
    ranking = dedupe([p.doc_id for p in passages])
    qrels = {g: 1.0 for g in gold}
    return {"recall@5": recall_at_k(ranking, qrels, 5), "ndcg@10": ndcg_at_k(ranking, qrels, 10)}


# -- tables -------------------------------------------------------------------------------------------------------
def cells_of(turn: dict) -> list[tuple[str, str]]:
    kinds = [k for k in KINDS if k in turn["multi_turn"]]
    out = [(turn["domain"], k) for k in kinds]
    if any(k != "N/A" for k in kinds):
        out += [(turn["domain"], FUCL), ("both", FUCL)]
    return out + [("both", "all turns")]


CELL_ORDER = [(d, k) for d in DOMAINS for k in (*KINDS, FUCL)] + [("both", FUCL), ("both", "all turns")]


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def summarise(rows: list[dict], methods: list[str], tested: list[str]) -> dict:
    """{cell: {n, method: {metric: mean}}} and p-values of the `tested` methods vs rewrite / last on FU+CL cells."""
    by_cell: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        for cell in r["cells"]:
            by_cell[cell].append(r)
    out = {}
    for cell in CELL_ORDER:
        group = by_cell.get(cell, [])
        if not group:
            continue
        entry: dict = {"n": len(group)}
        for m in methods:
            entry[m] = {k: round(mean([r["scores"][m][k] for r in group]), 4) for k in METRICS}
        if cell[1] == FUCL:
            entry["p"] = {}
            for m in tested:
                for base in ("rewrite", "last"):
                    for k in METRICS:
                        diff = [r["scores"][m][k] - r["scores"][base][k] for r in group]
                        entry["p"][f"{m} - {base} {k}"] = round(sign_flip_pvalue(diff), 4)
        out[" / ".join(cell)] = entry
    return out


def print_tables(summary: dict, methods: list[str]) -> None:
    for k in METRICS:
        print(f"\n{k}: mean (vs rewrite / vs last)\n")
        print("| domain / kind | n | " + " | ".join(methods) + " |")
        print("|---|---|" + "---|" * len(methods))
        for cell, entry in summary.items():
            rw, last = entry["rewrite"][k], entry["last"][k]
            parts = [f"{entry[m][k]:.3f} ({entry[m][k] - rw:+.3f} / {entry[m][k] - last:+.3f})" for m in methods]
            print(f"| {cell} | {entry['n']} | " + " | ".join(parts) + " |")
    terms = [m for m in methods if m not in BASELINES]
    if not terms:
        return
    print("\nFU+CL turns, paired sign-flip p (two-sided, 9,999 resamples): difference (p)\n")
    print("| domain | method | " + " | ".join(f"{k} vs {b}" for k in METRICS for b in ("rewrite", "last")) + " |")
    print("|---|---|" + "---|" * 4)
    for cell, entry in summary.items():
        if not cell.endswith(FUCL):
            continue
        for m in terms:
            parts = [
                f"{entry[m][k] - entry[b][k]:+.3f} ({entry['p'][f'{m} - {b} {k}']:.3f})"
                for k in METRICS
                for b in ("rewrite", "last")
            ]
            print(f"| {cell.split(' / ')[0]} | {m} | " + " | ".join(parts) + " |")


def print_grid(summary: dict, methods: list[str], top: int) -> list[dict]:
    """Grid rows ranked by the worse domain's FU+CL recall@5 margin over the rewrite (then pooled nDCG@10)."""
    rows = []
    for m in methods:
        if m in BASELINES:
            continue
        row = {"method": m}
        for d in DOMAINS:
            e = summary[f"{d} / {FUCL}"]
            row[f"{d} r5"] = e[m]["recall@5"]
            row[f"{d} r5-rw"] = round(e[m]["recall@5"] - e["rewrite"]["recall@5"], 4)
            row[f"{d} r5-last"] = round(e[m]["recall@5"] - e["last"]["recall@5"], 4)
            row[f"{d} ndcg"] = e[m]["ndcg@10"]
        pooled = summary[f"both / {FUCL}"]
        row["both r5"] = pooled[m]["recall@5"]
        row["both ndcg"] = pooled[m]["ndcg@10"]
        row["worst r5-rw"] = min(row[f"{d} r5-rw"] for d in DOMAINS)
        rows.append(row)
    rows.sort(key=lambda r: (-r["worst r5-rw"], -r["both ndcg"]))
    keys = [k for k in rows[0] if k != "method"] if rows else []
    print(f"\ngrid: FU+CL turns, best {min(top, len(rows))} of {len(rows)} by the worse domain's recall@5 - rewrite\n")
    print("| setting | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for r in rows[:top]:
        print(f"| {r['method']} | " + " | ".join(f"{r[k]:.3f}" for k in keys) + " |")
    return rows


# -- overhead -----------------------------------------------------------------------------------------------------
def overhead(turns: list[dict], searchers: dict[str, Searcher], conv: ConversationConfig, limit: int) -> dict:
    """p50 ms of follow_up_queries, and of uncached Retrieval.run with 1 query vs the step's 2 fused queries."""
    step, one, two, mismatched, checked = [], [], [], 0, 0
    sample = [t for t in turns if t["history"]][:limit]
    for t in sample:
        history = as_history(t["history"])
        question = t["question"].strip()
        for _ in range(5):
            t0 = time.perf_counter()
            queries = follow_up_queries(question, history, conv)
            step.append((time.perf_counter() - t0) * 1e3)
        if len(queries) < 2:
            queries = [*queries, question]
        s = searchers[t["domain"]]
        for qs, times in (([question], one), (queries[:2], two)):
            s.stack.embedder.clear_cache()
            t0 = time.perf_counter()
            passages = s.retrieval.run(qs, run=RunContext())
            times.append((time.perf_counter() - t0) * 1e3)
            if len(qs) == 2:
                checked += 1
                mismatched += [p.chunk_id for p in passages] != [p.chunk_id for p in s.run(qs)]
    return {
        "follow_up_queries_ms_p50": round(percentile(step, 50), 3),
        "follow_up_queries_ms_p95": round(percentile(step, 95), 3),
        "retrieval_1_query_ms_p50": round(percentile(one, 50), 1),
        "retrieval_2_queries_ms_p50": round(percentile(two, 50), 1),
        "turns_timed": len(sample),
        "cached_fusion_checked": checked,
        "cached_fusion_mismatched": mismatched,
    }


def git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


# -- main ---------------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="dev", choices=["dev", "test", "all"])
    ap.add_argument("--config", default=None, help="a config name or file (default: the defaults)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override, repeatable")
    ap.add_argument("--grid", action="store_true", help="score every setting of the built-in grid (dev only)")
    ap.add_argument(
        "--llm",
        action="store_true",
        help="also the `llm` method (the configured model condenses each turn; replies recorded in "
        "bench/out/conversation-retrieval/llm-cache, so a rerun calls no model)",
    )
    ap.add_argument("--top", type=int, default=15, help="--grid: rows printed")
    ap.add_argument("--timing-turns", type=int, default=100, help="turns timed for the overhead (0: none)")
    ap.add_argument("--out", default=None, help="the JSON result file")
    args = ap.parse_args()
    if args.grid and args.split != "dev":
        ap.error("--grid tunes: dev split only")

    config = load_config(args.config, args.set)
    conv = config.conversation
    turns = load_turns(args.split)
    scored = [t for t in turns if t["gold_passage_ids"]]
    corpora = write_corpora()
    searchers: dict[str, Searcher] = {}
    embedder = None
    for domain in DOMAINS:
        searchers[domain] = Searcher(config, corpora[domain], domain, embedder)
        embedder = searchers[domain].stack.embedder
        print(
            f"{domain}: {searchers[domain].stack.store.count(RunContext().groups)} chunks "
            f"(ingest pass {searchers[domain].ingest_s:.1f} s over {searchers[domain].ingested} documents)",
            file=sys.stderr,
            flush=True,
        )

    variants = grid_configs(conv) if args.grid else {"terms": conv}
    condense = None
    if args.llm:
        llm_config = config.llm.model_copy(update={"cache_dir": str(OUT / "llm-cache")})
        llm = SharedModels().llm(llm_config)
        llm_step = conv.model_copy(update={"method": "llm"})

        def condense(question: str, history: list[Message]) -> list[str]:
            made = standalone_question(question, history, llm_step, lambda: llm)
            return list(dict.fromkeys([made["standalone"], *made["context_queries"]]))

    methods = [*BASELINES, *variants, *(["llm"] if condense else [])]
    rows = []
    t_start = time.perf_counter()
    for i, t in enumerate(scored):
        history = as_history(t["history"])
        question = t["question"].strip()
        s = searchers[t["domain"]]
        scores = {}
        for m in BASELINES:
            scores[m] = score(s.run(baseline_queries(m, t, history)), t["gold_passage_ids"])
        for name, c in variants.items():
            scores[name] = score(s.run(follow_up_queries(question, history, c)), t["gold_passage_ids"])
        if condense is not None:
            scores["llm"] = score(s.run(condense(question, history)), t["gold_passage_ids"])
        rows.append({"task_id": t["task_id"], "cells": cells_of(t), "scores": scores})
        if (i + 1) % 25 == 0:
            print(f"{i + 1}/{len(scored)} turns, {time.perf_counter() - t_start:.0f} s", file=sys.stderr, flush=True)
            for s2 in searchers.values():
                s2.save()
    for s in searchers.values():
        s.save()

    summary = summarise(rows, methods, [] if args.grid else [m for m in methods if m not in BASELINES])
    conversations = {conversation_id(t["task_id"]) for t in turns}
    print(
        f"MTRAG clapnq+fiqa, split {args.split}: {len(conversations)} conversations, {len(turns)} turns, "
        f"{len(scored)} with gold passages; conversation config: {conv.model_dump(mode='json')}"
    )
    grid_rows = None
    if args.grid:
        grid_rows = print_grid(summary, methods, args.top)
        best = grid_rows[0]["method"]
        print_tables(summarise(rows, [*BASELINES, best], [best]), [*BASELINES, best])
    else:
        print_tables(summary, methods)

    timing = None
    if args.timing_turns and not args.grid:
        timing = overhead(turns, searchers, conv, args.timing_turns)
        print(
            f"\noverhead over {timing['turns_timed']} turns: follow_up_queries p50 {timing['follow_up_queries_ms_p50']} "
            f"ms (p95 {timing['follow_up_queries_ms_p95']}); one retrieval p50 {timing['retrieval_1_query_ms_p50']} ms "
            f"with 1 query, {timing['retrieval_2_queries_ms_p50']} ms with 2 fused queries; cached fusion = "
            f"Retrieval.run on {timing['cached_fusion_checked'] - timing['cached_fusion_mismatched']}/"
            f"{timing['cached_fusion_checked']}"
        )

    out = Path(args.out) if args.out else OUT / f"{args.split}-{'grid' if args.grid else 'terms'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "git_commit": git_commit(),
        "split": args.split,
        "conversations": len(conversations),
        "turns": len(turns),
        "scored_turns": len(scored),
        "conversation": conv.model_dump(mode="json"),
        "retrieve": config.retrieve.model_dump(mode="json"),
        "ingest": config.ingest.model_dump(mode="json"),
        "embedding_model": config.embedding.model,
        "summary": summary if not args.grid else {c: {k: e[k] for k in ("n", *BASELINES)} for c, e in summary.items()},
        "grid": grid_rows,
        "overhead": timing,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
