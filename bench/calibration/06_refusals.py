"""Step 6: refusals when the answer is indexed. Does word coverage rescue PhantomWiki's answerable questions from an
`incorrect` verdict without passing HotpotQA's unanswerable near misses?

Sets (all from the tuning data: PhantomWiki s11, or the development instances given with --phantomwiki, and HotpotQA
dev300_a / dev500):
- PW answerable: the 80 questions of each PhantomWiki instance against its own ~200 articles;
- HQ answerable: the 300 dev300_a questions against the dev300_a paragraphs;
- HQ near miss (unanswerable): dev500 questions against the dev300_a paragraphs (a gold title indexed: dropped).
Per question: the top-5 passages of the default retrieval, the best question-passage cosine and the best word
coverage (share of the question's content words found in a passage's title + text). The grade rule swept:
`incorrect` when best cosine < t AND best coverage < c (coverage 1.01 = today's cosine-only rule).

    .venv/bin/python bench/calibration/06_refusals.py
    .venv/bin/python bench/calibration/06_refusals.py --phantomwiki bench/out/phantomwiki/s1 bench/out/phantomwiki/s2

Prints per set the best-cosine and best-coverage quantiles, then the share graded incorrect for each (t, c) of
the sweep. Writes CACHE/refusals.json (per question: best cosine, best coverage) and records the figures in
bench/results/calibration_refusals.json (bench/results.py; `--result NAME` for a variant, e.g. the PhantomWiki
development instances): per set n and the quantiles, the sweep, and the `incorrect` rule before issue 12 and as
shipped (the default config's grade.thresholds), each with its shares; docs/benchmarks.md renders them with
bench/tables.py's `calibration_refusals`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py and results.py
import results  # noqa: E402
from common import CALIBRATION_CACHE as CACHE  # noqa: E402
from common import PHANTOMWIKI as PW
from common import (  # noqa: E402
    RECOMMENDED,
    ROOT,
    gold_titles,
    load_split,
    make_stack,
    paragraphs,
    repo_path,
    torch_threads,
)

QUANTILES = [0.05, 0.25, 0.5, 0.75, 0.95]
SWEEP_T = (0.35, 0.40, 0.45)
SWEEP_C = (0.5, 0.6, 0.67, 0.75, 0.8, 0.9, 1.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--phantomwiki",
        type=Path,
        nargs="+",
        default=[PW],
        help="PhantomWiki folders (default: s11; bench/phantomwiki_instances.py writes others)",
    )
    ap.add_argument(
        "--result",
        default="calibration_refusals",
        help="the result file's name: bench/results/NAME.json (another name for a variant, e.g. other instances)",
    )
    args = ap.parse_args()
    torch_threads(2)
    from switchyard.nodes.grade import passage_coverage
    from switchyard.retrievers.embedder import Embedder
    from switchyard.retrievers.store import ChunkFetch
    from switchyard.run_context import ALL

    embedder = Embedder("minilm")
    pw_stacks = {folder: make_stack(f"phantomwiki-{folder.name}", embedder) for folder in args.phantomwiki}
    for folder, stack in pw_stacks.items():
        stack.ingestor(progress=False).run([folder / "articles.json"])
    hq = make_stack("hotpot_a", embedder)
    a, b = load_split("a"), load_split("b")
    corpus = CACHE / "corpus_a.jsonl"
    if not corpus.exists():
        corpus.parent.mkdir(parents=True, exist_ok=True)
        with open(corpus, "w") as f:
            for title, text in paragraphs(a).items():
                f.write(json.dumps({"_id": title, "title": title, "text": text}) + "\n")
    hq.ingestor(progress=False).run([corpus])  # incremental: a cached index is reused
    indexed = set(paragraphs(a))

    def best(stack, question: str) -> tuple[float, float]:
        ps = stack.search(question, groups=ALL).passages[:5]
        if not ps:
            return 0.0, 0.0
        vecs = ChunkFetch(stack.store).vectors([p.chunk_id for p in ps])
        qv = embedder.embed_query(question)
        cos = max(float(vecs[p.chunk_id] @ qv) for p in ps)
        cov = max(passage_coverage(question, p) for p in ps)
        return cos, cov

    sets = {
        f"PW {folder.name} answerable": [
            best(stack, q["question"]) for q in json.loads((folder / "questions.json").read_text())
        ]
        for folder, stack in pw_stacks.items()
    }
    sets |= {
        "HQ answerable": [best(hq, r["question"]) for r in a],
        "HQ near miss": [best(hq, r["question"]) for r in b if not gold_titles(r) & indexed],
    }
    arr = {k: np.array(v) for k, v in sets.items()}
    (CACHE / "refusals.json").write_text(json.dumps({k: v for k, v in sets.items()}))
    q = lambda x: " ".join(f"{v:.2f}" for v in np.quantile(x, QUANTILES))
    for k, v in arr.items():
        print(f"{k:18s} n={len(v):3d}  best cos 5/25/50/75/95%: {q(v[:, 0])} | best coverage: {q(v[:, 1])}")
    print("rule: incorrect when cos < t and coverage < c  ->  share graded incorrect per set")
    print("   t     c    " + "  ".join(f"{k:>18s}" for k in arr))
    for t in SWEEP_T:
        for c in SWEEP_C:
            rates = [((v[:, 0] < t) & (v[:, 1] < c)).mean() for v in arr.values()]
            print(f"  {t:.2f}  {c:.2f}  " + "  ".join(f"{r:18.1%}" for r in rates))
    path = results.record(args.result, figures(arr), {"phantomwiki": [repo_path(f) for f in args.phantomwiki]})
    print(f"result: {path.relative_to(ROOT)}")


def figures(arr: dict[str, np.ndarray]) -> dict:
    """Per set n and the quantiles of best cosine / best coverage; the share graded incorrect per (t, c) of the sweep;
    the rule before issue 12 (cosine only, the calibration's `incorrect`) and the shipped one, with their shares."""
    from switchyard.configs.loader import load_config

    def rates(t: float, c: float) -> dict[str, float]:
        return {k: round(float(((v[:, 0] < t) & (v[:, 1] < c)).mean()), 4) for k, v in arr.items()}

    shipped = load_config(None, []).grade.thresholds
    return {
        "quantiles": QUANTILES,
        "sets": {
            k: {
                "n": len(v),
                "cosine": [round(float(x), 4) for x in np.quantile(v[:, 0], QUANTILES)],
                "coverage": [round(float(x), 4) for x in np.quantile(v[:, 1], QUANTILES)],
            }
            for k, v in arr.items()
        },
        "sweep": [{"t": t, "c": c, "rates": rates(t, c)} for t in SWEEP_T for c in SWEEP_C],
        "before": {"t": RECOMMENDED["incorrect"], "c": 1.01, "rates": rates(RECOMMENDED["incorrect"], 1.01)},
        "shipped": {"t": shipped.incorrect, "c": shipped.coverage, "rates": rates(shipped.incorrect, shipped.coverage)},
    }


if __name__ == "__main__":
    main()
