"""How far to trust a generated question set (issue 63, goal 4): generate a set from a labelled dataset's own corpus,
run the labelled run's configs on it, and compare the two rankings (evaluation/agreement.py: Kendall's tau-b, the
paired differences side by side), with the generator's yield and reasons for rejection.

    .venv/bin/python bench/generated_agreement.py --dataset ../shared/datasets/phantomwiki-s11 \\
        --labelled bench/eval/phantomwiki-s11 --set bench/sets/phantomwiki-s11-answer-first \\
        --out bench/eval/generated-phantomwiki-s11 --size 40 --max-tries 120 --answers passage --max-copy 0.8 \\
        --generate-only                      # then review it: cli.py eval review SET
    ... --all-kept                           # score every kept item
    ... --reviewed --out bench/eval/generated-phantomwiki-s11-reviewed --caches bench/eval/generated-phantomwiki-s11
    # HotpotQA: the dev500 paragraphs; the evaluation extends the server grid's vectors of that corpus (in f32, theirs)
    D=../shared/datasets/hotpotqa_dev_distractor_sample
    .venv/bin/python bench/generated_agreement.py --dataset $D/dev500.jsonl \\
        --labelled bench/eval/hotpotqa-dev100 --set bench/sets/hotpotqa-dev500-answer-first \\
        --out bench/eval/generated-hotpotqa --size 40 --max-tries 100 --answers passage --all-kept \\
        --share-vectors bench/eval/agent-compare-hotpotqa-server-all/vectors --eval-set embedding.precision=f32
    # a stronger generator behind an OpenAI-compatible server (the evaluated configs stay the labelled run's):
    ... --generator-config configs/fixed-openai.yaml --generator-set llm.base_url=http://127.0.0.1:8000/v1

Steps, each resumable (rerun the same command): `cli.py eval generate` over the dataset's corpus into SET (a
dataset, kept under bench/sets/; its replies recorded in SET/llm-cache); unless `--generate-only`, `cli.py eval`
with the labelled run's configs (LABELLED/configs/*.yaml) into OUT on SET's items (`--unreviewed` by default: a
review's rejections left out; `--reviewed`: only accepted and edited items; `--all-kept`: every kept item, whatever
a review said), its replies and vectors recorded under OUT (or under `--caches DIR`), then one table per
`--metrics`, printed and written to OUT/agreement.md. `--replay` answers every LLM request and vector from what was
recorded (no model). `--share-vectors DIR` makes the evaluation's vector recording extend DIR
(CACHES/vectors/bases.txt, retrievers/vector_recording.py), so a corpus another run recorded is not stored twice;
`--eval-set` sets every evaluated config (the shared vectors' runtime, for one). The labelled figures are
LABELLED/report.json's; both reports are paired against `--baseline` (default fixed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

from switchyard.evaluation.agreement import agreement_markdown, rank_agreement
from switchyard.evaluation.datasets import load_dataset
from switchyard.retrievers.vector_recording import BASES


def cli(*args: str) -> None:
    cmd = [sys.executable, str(ROOT / "cli.py"), *args]
    print("$ " + " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd, cwd=ROOT)
    if done.returncode not in (0, 1):
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd[1:])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, type=Path, help="the labelled dataset (its corpus is generated from)")
    p.add_argument("--labelled", required=True, type=Path, help="the labelled run's folder (report.json, configs/)")
    p.add_argument("--set", required=True, type=Path, help="the generated set's folder")
    p.add_argument("--out", required=True, type=Path, help="the evaluation's folder")
    p.add_argument("--size", type=int, default=40)
    p.add_argument("--max-tries", type=int, default=0)
    p.add_argument("--two-hop", type=float, default=0.0)
    p.add_argument("--answers", default="model", choices=["model", "passage"])
    p.add_argument("--max-copy", type=float, default=0.5)
    p.add_argument(
        "--metrics", nargs="+", default=["contains", "gold_recall"], help="one table each (the first is plotted)",
        choices=["contains", "f1", "exact_match", "gold_recall", "citation_precision"],
    )  # fmt: skip
    p.add_argument("--baseline", default="fixed")
    p.add_argument("--generator-config", help="the generator's config (default: the shipped one, the local model)")
    p.add_argument("--generator-set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--eval-set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of every evaluated config (e.g. embedding.precision=f32, the runtime of --share-vectors)",
    )
    p.add_argument(
        "--share-vectors", type=Path, metavar="DIR", help="another run's vector recording over the same corpus, which "
        "the evaluation's extends (CACHES/vectors/bases.txt) instead of recording the corpus again",
    )  # fmt: skip
    p.add_argument("--replay", action="store_true", help="answer only from the recorded replies and vectors")
    p.add_argument("--generate-only", action="store_true", help="stop after generating (to review the set first)")
    scored = p.add_mutually_exclusive_group()
    scored.add_argument(
        "--reviewed", action="store_true", help="score only the items accepted or edited in SET/review.jsonl "
        "(cli.py eval review)",
    )  # fmt: skip
    scored.add_argument(
        "--all-kept", action="store_true", help="score every kept item, SET/questions.jsonl as a plain dataset, "
        "whatever a review decided (default: the set as `eval SET --unreviewed` reads it: rejected items left out)",
    )  # fmt: skip
    p.add_argument(
        "--caches", type=Path, metavar="DIR", help="the run whose llm-cache/ and vectors/ to record into and answer "
        "from (default: OUT; a reviewed run replays its unreviewed run's: --caches that run's folder)",
    )  # fmt: skip
    p.add_argument(
        "--allow-mixed", action="store_true", help="resume OUT under a different setup (passed to `cli.py eval`)"
    )
    args = p.parse_args()

    corpus = load_dataset(args.dataset, cache_dir=Path(tempfile.gettempdir()) / "switchyard-agreement").corpus
    if len(corpus) != 1:
        sys.exit(f"{args.dataset}: expected one corpus file, got {len(corpus)}")
    out, qset, replay = args.out, args.set, ["--replay"] if args.replay else []
    gen = ["eval", "generate", str(corpus[0]), "--out", str(qset), "--size", str(args.size), "--no-progress"]
    gen += [
        "--max-tries",
        str(args.max_tries),
        "--two-hop",
        str(args.two_hop),
        "--answers",
        args.answers,
        "--max-copy",
        str(args.max_copy),
        "--llm-cache",
        str(qset / "llm-cache"),
    ]
    gen += (["--config", args.generator_config] if args.generator_config else []) + replay
    for setting in args.generator_set:
        gen += ["--set", setting]
    cli(*gen)
    if args.generate_only:
        return
    configs = sorted(str(c) for c in (args.labelled / "configs").glob("*.yaml"))
    caches = args.caches or out
    dataset = (
        [str(qset / "questions.jsonl")] if args.all_kept else [str(qset)] + ([] if args.reviewed else ["--unreviewed"])
    )
    if args.share_vectors:
        (caches / "vectors").mkdir(parents=True, exist_ok=True)
        shared = os.path.relpath(args.share_vectors.resolve(), (caches / "vectors").resolve())
        (caches / "vectors" / BASES).write_text(shared + "\n")
    settings = [arg for setting in args.settings for arg in ("--set", setting)]
    started = time.time()
    index = Path(tempfile.gettempdir()) / "switchyard-agreement-index"  # the labelled corpus, ingested once per config
    cli("eval", *dataset, "--corpus", str(corpus[0]), "--configs", *configs, "--index-dir", str(index),
        "--baseline", args.baseline, "--out", str(out), "--llm-cache", str(caches / "llm-cache"),
        "--vector-cache", str(caches / "vectors"), "--plot-metric", args.metrics[0], "--no-progress", *settings,
        *replay, *(["--allow-mixed"] if args.allow_mixed else []))  # fmt: skip
    if not (out / "report.json").is_file() or (out / "report.json").stat().st_mtime < started:
        sys.exit(f"failed: `cli.py eval` wrote no {out / 'report.json'} (its error is above)")

    labelled = json.loads((args.labelled / "report.json").read_text())
    generated = json.loads((out / "report.json").read_text())
    generation = json.loads((qset / "generation.json").read_text())
    reasons = ", ".join(f"{n} {r}" for r, n in generation["reasons"].items() if r != "kept")
    text = (
        f"Generated set: kept {generation['kept']} of {generation['tried']} tried ({generation['yield']:.0%}) by "
        f"{generation['model']['backend']} {Path(str(generation['model']['model'])).name}; rejected: {reasons}\n\n"
        + "\n\n".join(agreement_markdown(rank_agreement(labelled, generated, m), args.baseline) for m in args.metrics)
        + "\n"
    )
    (out / "agreement.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
