"""Step 3: calibrate answer.support_threshold with nodes.citations.support_matrix on HotpotQA pairs.

Passages are the indexed chunks of 01_retrieve.py (text as stored, vector = the stored title+text vector, exactly
what nodes/answer.py hands to verify_citations). Pair sets per split (a = dev300_a tunes, b = dev500 reports):

  fact      supported:   every supporting-fact sentence with its own paragraph
            unsupported: the same sentence with one random distractor paragraph of the same question (seeded)
  fact-all-distractors  unsupported (diagnostic): the same sentence with each of the question's 8 distractors
  qa        supported:   "<question without '?'>: <answer>." with the gold paragraph that contains the answer
            unsupported: the same with a random distractor that does not contain the answer
  swap      unsupported (diagnostic, an invented fact): a supporting sentence that contains the answer, with the
            answer replaced by another question's answer of the same type, against its own paragraph

The threshold is chosen on split a to maximise accuracy over the pooled fact + qa pairs (balanced: one negative
per positive). Sentence vectors are cached in CACHE/sent_{split}.npy.

    .venv/bin/python bench/calibration/03_support.py

Prints the pair counts, support-score quantiles per pair set, the tuning sweep, accuracy / F1 / recall / TNR per
threshold, split and set, and the held-out accuracy difference new - old with a bootstrap interval. Writes
CACHE/support_choice.json, and records bench/results/calibration_thresholds.json (bench/results.py): the grade
figures 02_grade.py left in CACHE/grade_figures.json (run it first) and this step's, i.e. the pair counts, per
threshold (old, 0.50, the tuned one) and split the accuracy / F1 / recall / TNR per set, the share of all
distractors and of answer-swapped sentences rejected, the bootstrap difference, and the shipped
answer.support_threshold. docs/benchmarks.md renders them with bench/tables.py's `calibration_grade` and
`calibration_support`.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py and results.py
import results  # noqa: E402
from common import CALIBRATION_CACHE as CACHE  # noqa: E402
from common import (  # noqa: E402
    HOTPOT_SPLITS,
    HOTPOTQA,
    OLD,
    RECOMMENDED,
    ROOT,
    load_split,
    make_stack,
    repo_path,
    torch_threads,
)

from switchyard.nodes.citations import support_matrix
from switchyard.retrievers.documents import Passage
from switchyard.run_context import ALL

GRID = np.round(np.arange(0.30, 0.9001, 0.01), 2)
DIRECTION = {"a": "tune", "b": "held_out"}  # the keys of the recorded figures, as in 02_grade.py's


class CachedEmbedder:
    """Stands in for the stack embedder inside support_matrix: sentence vectors come from a precomputed table."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    def run(self, texts):
        return np.stack([self.table[t] for t in texts])


def chunks_by_title(stack) -> dict[str, list[dict]]:
    rows = stack.store.scan(["chunk_id", "title", "text", "vector"], scope=ALL).to_pylist()
    out: dict[str, list[dict]] = {}
    for r in rows:
        r["vector"] = np.asarray(r["vector"], dtype=np.float32)
        out.setdefault(r["title"], []).append(r)
    return out


def norm(s: str) -> str:
    return " ".join(s.split()).lower()


def pick_chunk(chunks: list[dict], sentence: str) -> dict:
    """The chunk holding the sentence (paragraphs longer than a chunk are split)."""
    key = norm(sentence)[:60]
    for c in chunks:
        if key in norm(c["text"]):
            return c
    return chunks[0]


def build_pairs(split: str, records: list[dict], chunks: dict[str, list[dict]]):
    rng = random.Random(0)
    answers_by_type: dict[str, list[str]] = {}
    for r in records:
        answers_by_type.setdefault(r["type"], []).append(r["answer"])
    pairs = []  # (set, sentence, passage dict, label)
    for r in records:
        ctx = dict(zip(r["context"]["title"], r["context"]["sentences"]))
        gold = set(r["supporting_facts"]["title"])
        distractors = [t for t in ctx if t not in gold and t in chunks]
        for title, sid in zip(r["supporting_facts"]["title"], r["supporting_facts"]["sent_id"]):
            sent = ctx[title][sid].strip()
            if len(sent.split()) < 4 or title not in chunks:
                continue
            own = pick_chunk(chunks[title], sent)
            pairs.append(("fact", sent, own, 1))
            if distractors:
                d = rng.choice(distractors)
                pairs.append(("fact", sent, pick_chunk(chunks[d], ""), 0))
                for d in distractors:
                    pairs.append(("fact-all-distractors", sent, pick_chunk(chunks[d], ""), 0))
            ans = r["answer"].strip()
            if ans.lower() not in ("yes", "no") and len(ans) > 2 and ans.lower() in sent.lower():
                others = [
                    a for a in answers_by_type[r["type"]] if a.lower() != ans.lower() and a.lower() not in ("yes", "no")
                ]
                fake = re.sub(re.escape(ans), rng.choice(others), sent, count=1, flags=re.I)
                pairs.append(("swap", fake, own, 0))
        ans = r["answer"].strip()
        if ans.lower() in ("yes", "no"):
            continue
        qa = f"{r['question'].strip().rstrip('?').strip()}: {ans}."
        holders = [
            t
            for t in dict.fromkeys(r["supporting_facts"]["title"])
            if t in ctx and ans.lower() in "".join(ctx[t]).lower() and t in chunks
        ]
        if holders:
            pairs.append(("qa", qa, pick_chunk(chunks[holders[0]], ans), 1))
            free = [t for t in distractors if ans.lower() not in "".join(ctx[t]).lower()]
            if free:
                pairs.append(("qa", qa, pick_chunk(chunks[rng.choice(free)], ""), 0))
    return pairs


def score_pairs(split: str, pairs, embedder) -> np.ndarray:
    sents = sorted({s for _, s, _, _ in pairs})
    path = CACHE / f"sent_{split}.npy"
    names = CACHE / f"sent_{split}.json"
    if path.exists() and names.exists() and json.loads(names.read_text()) == sents:
        vecs = np.load(path)
    else:
        vecs = embedder.run(sents)
        np.save(path, vecs)
        names.write_text(json.dumps(sents))
    cached = CachedEmbedder(dict(zip(sents, vecs)))
    out = []
    for _, sent, chunk, _ in pairs:
        passage = Passage(chunk["chunk_id"], chunk["title"], "", chunk["title"], chunk["text"])
        out.append(support_matrix([sent], [passage], cached, passage_vectors=chunk["vector"][None, :])[0][0])
    return np.array(out)


def metrics(score, label, t):
    pred = score >= t
    tp = (pred & label).sum()
    p = tp / pred.sum() if pred.sum() else 0.0
    r = tp / label.sum() if label.sum() else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return float((pred == label).mean()), float(f), float(r), float(1 - (pred & ~label).sum() / max((~label).sum(), 1))


def main() -> None:
    torch_threads()
    from switchyard.retrievers.embedder import Embedder

    embedder = Embedder("minilm")
    data = {}
    counts = {}
    for split in ("a", "b"):
        stack = make_stack(f"hotpot_{split}", embedder)
        pairs = build_pairs(split, load_split(split), chunks_by_title(stack))
        scores = score_pairs(split, pairs, embedder)
        sets = np.array([p[0] for p in pairs])
        labels = np.array([p[3] for p in pairs]).astype(bool)
        data[split] = (sets, labels, scores)
        counts[DIRECTION[split]] = {
            s: {"pairs": int((sets == s).sum()), "supported": int(labels[sets == s].sum())} for s in dict.fromkeys(sets)
        }
        print(
            f"split {split}: "
            + ", ".join(
                f"{s} {int((sets == s).sum())} ({int(labels[sets == s].sum())} supported)" for s in dict.fromkeys(sets)
            )
        )
        q = lambda x: " ".join(f"{v:.2f}" for v in np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95]))
        for s in dict.fromkeys(sets):
            for lab in (1, 0):
                m = (sets == s) & (labels == lab)
                if m.any():
                    print(
                        f"   support quantiles 5/25/50/75/95%  {s:<21} {'supported' if lab else 'unsupported':<12}: {q(scores[m])}"
                    )

    def pool(split):
        sets, labels, scores = data[split]
        m = np.isin(sets, ["fact", "qa"])
        return scores[m], labels[m]

    s, l = pool("a")  # noqa: E741
    accs = [metrics(s, l, t)[0] for t in GRID]
    new = float(GRID[int(np.argmax(accs))])
    f1s = [metrics(s, l, t)[1] for t in GRID]
    print(
        f"\nchosen on tuning (max accuracy, fact+qa pooled): {new}  (max-F1 threshold would be {GRID[int(np.argmax(f1s))]})"
    )
    print("  tuning sweep: t  acc  F1")
    for t in np.arange(0.40, 0.76, 0.05):
        a, f, _, _ = metrics(s, l, t)
        print(f"    {t:.2f}  {a:.3f}  {f:.3f}")

    print(f"\n{'threshold':<10}{'split':<10}{'set':<22}{'acc':>7}{'F1(sup)':>9}{'recall':>8}{'TNR':>7}")
    thresholds = {}
    for name, t in (("OLD", OLD["support"]), ("MID", 0.50), ("NEW", new)):
        thresholds[name.lower()] = {"t": t}
        for split in ("a", "b"):
            sets, labels, scores = data[split]
            groups = {"fact+qa (pooled)": np.isin(sets, ["fact", "qa"]), "fact": sets == "fact", "qa": sets == "qa"}
            for g, m in groups.items():
                a, f, r, tnr = metrics(scores[m], labels[m], t)
                thresholds[name.lower()].setdefault(DIRECTION[split], {})[g] = _rounded(
                    {"accuracy": a, "f1": f, "recall": r, "tnr": tnr}
                )
                print(
                    f"{name} {t:<6.2f}{'dev300_a' if split == 'a' else 'dev500':<10}{g:<22}{a:7.3f}{f:9.3f}{r:8.3f}{tnr:7.3f}"
                )
            hard = sets == "fact-all-distractors"
            swap = sets == "swap"
            thresholds[name.lower()][DIRECTION[split]] |= _rounded(
                {"distractors_rejected": (scores[hard] < t).mean(), "swapped_rejected": (scores[swap] < t).mean()}
            )
            print(
                f"{'':<20}{'all distractors rejected:':<22}{(scores[hard] < t).mean():7.3f}   "
                f"answer-swapped (invented) rejected: {(scores[swap] < t).mean():.3f}"
            )
    rng = np.random.default_rng(0)
    s_b, l_b = pool("b")
    diffs = []
    for _ in range(1000):
        i = rng.integers(0, len(s_b), len(s_b))
        diffs.append(metrics(s_b[i], l_b[i], new)[0] - metrics(s_b[i], l_b[i], OLD["support"])[0])
    lo, hi = np.quantile(diffs, [0.025, 0.975])
    print(f"\nheld-out pooled accuracy NEW - OLD: {np.mean(diffs):+.3f} (bootstrap 95% CI {lo:+.3f} .. {hi:+.3f})")
    (CACHE / "support_choice.json").write_text(json.dumps({"support": new}))
    support = {
        "pairs": counts,
        "thresholds": thresholds,
        "bootstrap": _rounded({"new_minus_old": np.mean(diffs), "low": lo, "high": hi}) | {"samples": len(diffs)},
    }
    record(support, new)


def record(support: dict, new: float) -> None:
    """bench/results/calibration_thresholds.json: 02_grade.py's figures (CACHE/grade_figures.json) and this step's,
    with the shipped answer.support_threshold."""
    from switchyard.configs.loader import load_config

    grade_path = CACHE / "grade_figures.json"
    if not grade_path.exists():
        sys.exit(f"{grade_path}: missing, so no result recorded (run bench/calibration/02_grade.py, then this again)")
    support |= {"tuned": new, "shipped": load_config(None, []).answer.support_threshold}
    config = {
        "hotpotqa": repo_path(HOTPOTQA),
        "splits": {"tune": HOTPOT_SPLITS["a"], "held_out": HOTPOT_SPLITS["b"]},
        "embedder": "minilm",
        "top_k": 5,
        "old": OLD,
        "recommended": RECOMMENDED,
        "support_grid": [float(GRID[0]), float(GRID[-1]), 0.01],
        "support_choice": "max accuracy on split a, fact + qa pooled",
    }
    figures = {"grade": json.loads(grade_path.read_text()), "support": support}
    print(f"result: {results.record('calibration_thresholds', figures, config).relative_to(ROOT)}")


def _rounded(values: dict) -> dict:
    return {k: round(float(v), 4) for k, v in values.items()}


if __name__ == "__main__":
    main()
