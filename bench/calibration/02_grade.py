"""Step 2: calibrate grade.thresholds {relevant, incorrect, correct} on the cached runs of 01_retrieve.py.

Tuning direction (a): index = dev300_a paragraphs; answerable = dev300_a questions, unanswerable = dev500 questions
(minus the few whose gold paragraph title is in the dev300_a index). Held-out direction (b): the reverse.

- relevant: passage-level label = title is a supporting-fact title; score = cosine(question, stored vector);
  chosen to maximise F1 over the top-5 passages of the answerable questions.
- incorrect: verdict 'incorrect' when max cosine < t. Chosen as the largest t (0.01 grid) with at most
  MAX_FALSE_INCORRECT of the answerable questions graded incorrect; we report how many unanswerable ones it catches.
- correct: smallest c such that, among questions with max cosine >= c, at least MIN_CORRECT_PRECISION are
  'truly answerable' (answerable question AND a gold paragraph in the top 5), with answerable and unanswerable
  questions weighted 50/50 (the tuning pool has 300 vs ~495; weighting removes that prior).

    .venv/bin/python bench/calibration/02_grade.py

Prints, per direction, the answerable / unanswerable max-cosine quantiles and AUC, a table of passage P / R / F1
and verdict shares for the old, tuned and RECOMMENDED thresholds, and the incorrect / correct threshold sweeps.
Writes CACHE/grade_choice.json (the tuned values) and CACHE/grade_figures.json (per direction the question counts
and gold-in-top-5 share; per row old / HotpotQA optimum / calibration default the thresholds, passage P / R / F1 /
bAcc and verdict shares), which 03_support.py records with its own figures in
bench/results/calibration_thresholds.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py
from common import CALIBRATION_CACHE as CACHE  # noqa: E402
from common import OLD, RECOMMENDED

MAX_FALSE_INCORRECT = 0.10
MIN_CORRECT_PRECISION = 0.90
GRID = np.round(np.arange(0.0, 1.0001, 0.01), 2)


def load(q: str, idx: str) -> list[dict]:
    return json.loads((CACHE / f"runs_{q}_{idx}.json").read_text())


def passage_arrays(rows):
    cos = np.array([c for r in rows for c in r["cos"]])
    lab = np.array([p["title"] in r["gold"] for r in rows for p in r["passages"]])
    return cos, lab


def prf(cos, lab, t):
    pred = cos >= t
    tp = float((pred & lab).sum())
    p = tp / pred.sum() if pred.sum() else 0.0
    r = tp / lab.sum() if lab.sum() else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    tnr = float((~pred & ~lab).sum()) / max((~lab).sum(), 1)
    return p, r, f, (r + tnr) / 2


def best(rows):
    return np.array([max(r["cos"]) if r["cos"] else -1.0 for r in rows])


def hit(rows):
    return np.array([any(p["title"] in r["gold"] for p in r["passages"]) for r in rows])


def verdict_stats(ans, una, inc, cor):
    ba, bu, h = best(ans), best(una), hit(ans)
    out = {
        "ans_incorrect": float((ba < inc).mean()),
        "ans_hit_incorrect": float((ba[h] < inc).mean()),  # answerable AND a gold passage retrieved
        "una_incorrect": float((bu < inc).mean()),
        "ans_correct": float((ba >= cor).mean()),
        "una_correct": float((bu >= cor).mean()),
    }
    out["correct_precision"] = correct_precision(ba, h, bu, cor)
    return out


def correct_precision(ba, h, bu, c):
    """P(truly answerable | max cos >= c) with answerable and unanswerable questions weighted 50/50."""
    tp = (ba[h] >= c).sum() / len(ba)
    fp = (ba[~h] >= c).sum() / len(ba) + (bu >= c).mean()
    return float(tp / (tp + fp)) if tp + fp else float("nan")


def choose(ans, una):
    cos, lab = passage_arrays(ans)
    f1 = [prf(cos, lab, t)[2] for t in GRID]
    relevant = float(GRID[int(np.argmax(f1))])
    bacc = [prf(cos, lab, t)[3] for t in GRID]
    relevant_bacc = float(GRID[int(np.argmax(bacc))])
    f2 = [(lambda p, r: 5 * p * r / (4 * p + r) if p + r else 0.0)(*prf(cos, lab, t)[:2]) for t in GRID]
    relevant_f2 = float(GRID[int(np.argmax(f2))])
    ba, bu, h = best(ans), best(una), hit(ans)
    ok = [t for t in GRID if (ba < t).mean() <= MAX_FALSE_INCORRECT]
    incorrect = float(max(ok))
    ok_c = [
        c
        for c in GRID
        if c >= incorrect and correct_precision(ba, h, bu, c) >= MIN_CORRECT_PRECISION and (ba >= c).sum() >= 10
    ]
    correct = float(min(ok_c)) if ok_c else float("nan")
    return {
        "relevant": relevant,
        "relevant_bacc": relevant_bacc,
        "relevant_f2": relevant_f2,
        "incorrect": incorrect,
        "correct": correct,
    }


def auc(positive, negative) -> float:
    """ROC AUC of scores that should rank `positive` above `negative`: the Mann-Whitney U of the positives over
    the pairs (ties count one half), which is what sklearn's roc_auc_score gives."""
    from scipy.stats import mannwhitneyu  # noqa: PLC0415

    return float(mannwhitneyu(positive, negative).statistic) / (len(positive) * len(negative))


def describe(name, ans, una):
    ba, bu, h = best(ans), best(una), hit(ans)
    cos, lab = passage_arrays(ans)
    q = lambda x: " ".join(f"{v:.2f}" for v in np.quantile(x, [0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95]))
    print(
        f"[{name}] answerable n={len(ans)} (gold in top-5: {h.mean():.1%}, both gold: "
        f"{np.mean([sum(p['title'] in r['gold'] for p in r['passages']) >= 2 for r in ans]):.1%}), "
        f"unanswerable n={len(una)}"
    )
    print(f"  max-cos quantiles 5/10/25/50/75/90/95%  answerable:   {q(ba)}")
    print(f"                                         unanswerable: {q(bu)}")
    print(f"  passage cos quantiles  gold:     {q(cos[lab])}")
    print(f"                         non-gold: {q(cos[~lab])}")
    print(
        f"  AUC max-cos answerable vs unanswerable: {auc(ba, bu):.3f}; "
        f"passage gold vs non-gold: {auc(cos[lab], cos[~lab]):.3f}"
    )


def table(label, th, dirs):
    print(f"\n{label}: relevant={th['relevant']:.2f} incorrect={th['incorrect']:.2f} correct={th['correct']:.2f}")
    print(
        f"  {'direction':<22}{'P':>6}{'R':>6}{'F1':>6}{'bAcc':>6} | {'ans→inc':>8}{'ans(hit)→inc':>13}"
        f"{'unans→inc':>10} | {'ans→cor':>8}{'unans→cor':>10}{'prec(cor)':>10}"
    )
    for name, (ans, una) in dirs.items():
        cos, lab = passage_arrays(ans)
        p, r, f, b = prf(cos, lab, th["relevant"])
        v = verdict_stats(ans, una, th["incorrect"], th["correct"])
        print(
            f"  {name:<22}{p:6.3f}{r:6.3f}{f:6.3f}{b:6.3f} | {v['ans_incorrect']:8.1%}{v['ans_hit_incorrect']:13.1%}"
            f"{v['una_incorrect']:10.1%} | {v['ans_correct']:8.1%}{v['una_correct']:10.1%}{v['correct_precision']:10.1%}"
        )


def sweep(dirs):
    print("\n  incorrect-threshold sweep t: share graded incorrect (answerable | unanswerable), per direction")
    for t in (0.25, 0.30, 0.35, 0.40, 0.42, 0.45, 0.48, 0.50, 0.52, 0.55, 0.60):
        cells = [f"{(best(a) < t).mean():6.1%} {(best(u) < t).mean():6.1%}" for a, u in dirs.values()]
        print(f"    t={t:.2f}  " + "   |   ".join(cells))
    print(
        "\n  correct-threshold sweep c: 50/50-weighted precision of 'correct' (tune | held-out), share of answerable >= c"
    )
    for c in (0.45, 0.50, 0.52, 0.55, 0.58, 0.60, 0.65):
        cells = [
            f"{correct_precision(best(a), hit(a), best(u), c):6.1%} {(best(a) >= c).mean():6.1%}"
            for a, u in dirs.values()
        ]
        print(f"    c={c:.2f}  " + "   |   ".join(cells))
    print(
        "\n  relevant-threshold sweep r (answerable questions): P R F1 F2, share of questions keeping every retrieved gold"
    )
    for r in (0.25, 0.30, 0.35, 0.40, 0.45, 0.51):
        cells = []
        for a, _ in dirs.values():
            cos, lab = passage_arrays(a)
            p, rec, f, _ = prf(cos, lab, r)
            f2 = 5 * p * rec / (4 * p + rec) if p + rec else 0.0
            full = np.mean(
                [all(c >= r for c, ps in zip(x["cos"], x["passages"]) if ps["title"] in x["gold"]) for x in a]
            )
            cells.append(f"{p:.3f} {rec:.3f} {f:.3f} {f2:.3f} {full:6.1%}")
        print(f"    r={r:.2f}  " + "   |   ".join(cells))


def main() -> None:
    dirs = {
        "tune  (idx dev300_a)": (load("a", "a"), load("b", "a")),
        "held-out (idx dev500)": (load("b", "b"), load("a", "b")),
    }
    for name, (ans, una) in dirs.items():
        describe(name, ans, una)
    tune_ans, tune_una = dirs["tune  (idx dev300_a)"]
    sweep(dirs)
    new = choose(tune_ans, tune_una)
    print(
        f"\nchosen on tuning: {new}  (relevant by balanced accuracy: {new['relevant_bacc']}, by F2: {new['relevant_f2']})"
    )
    table("OLD", OLD, dirs)
    table("NEW (HotpotQA protocol optimum)", new, dirs)
    table("RECOMMENDED default", RECOMMENDED, dirs)
    (CACHE / "grade_choice.json").write_text(json.dumps(new))
    rows = {"old": OLD, "optimum": new, "default": RECOMMENDED}
    (CACHE / "grade_figures.json").write_text(json.dumps(figures(rows, dict(zip(("tune", "held_out"), dirs.values())))))


def figures(rows: dict[str, dict], dirs: dict[str, tuple[list, list]]) -> dict:
    """What the tables print, as numbers: per direction (tune, held_out) the question counts and the share of
    answerable questions with a gold paragraph in the top 5; per row its thresholds and, per direction, passage
    P / R / F1 / bAcc at `relevant` and the verdict shares at `incorrect` / `correct`."""

    def scores(th: dict, ans: list, una: list) -> dict:
        cos, lab = passage_arrays(ans)
        p, r, f, b = prf(cos, lab, th["relevant"])
        passage = {"precision": p, "recall": r, "f1": f, "bacc": b}
        return {
            k: round(float(v), 4)
            for k, v in (passage | verdict_stats(ans, una, th["incorrect"], th["correct"])).items()
        }

    return {
        "directions": {
            name: {"answerable": len(ans), "unanswerable": len(una), "gold_in_top5": round(float(hit(ans).mean()), 4)}
            for name, (ans, una) in dirs.items()
        },
        "constraints": {"max_false_incorrect": MAX_FALSE_INCORRECT, "min_correct_precision": MIN_CORRECT_PRECISION},
        "rows": {
            name: {
                "thresholds": {k: th[k] for k in ("relevant", "incorrect", "correct")},
                **{d: scores(th, ans, una) for d, (ans, una) in dirs.items()},
            }
            for name, th in rows.items()
        },
    }


if __name__ == "__main__":
    main()
