"""Step 5 (second check): grade verdicts on PhantomWiki s11 (203 articles, 80 templated questions, all answerable).

Answerable = PhantomWiki questions against the PhantomWiki index; unanswerable (off-domain) = the first 200 dev300_a
questions against it. A passage counts as relevant when its title names a person in the question's solution
traces or answers. Short, templated questions ("Who is the friend of the person whose date of birth is ...?")
are far from HotpotQA's long entity-laden questions, which is the point of the check.

    .venv/bin/python bench/calibration/05_phantomwiki.py

Needs CACHE/grade_choice.json (step 2). Prints max-cosine quantiles (PhantomWiki answerable, off-domain), the share
of answerable questions graded incorrect per threshold set, and an incorrect-threshold sweep. Writes
CACHE/pw_ans_best.npy and CACHE/pw_offdomain_best.npy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py
from common import CALIBRATION_CACHE as CACHE  # noqa: E402
from common import OLD, RECOMMENDED, load_split, make_stack, torch_threads  # noqa: E402
from common import PHANTOMWIKI as PW


def main() -> None:
    torch_threads()
    from switchyard.retrievers.embedder import Embedder
    from switchyard.retrievers.store import ChunkFetch
    from switchyard.run_context import ALL

    embedder = Embedder("minilm")
    stack = make_stack("phantomwiki", embedder)
    stack.ingestor(progress=False).run([PW / "articles.json"])
    choice = json.loads((CACHE / "grade_choice.json").read_text())

    def top5(q):
        ps = stack.search(q, groups=ALL).passages
        vecs = ChunkFetch(stack.store).vectors([p.chunk_id for p in ps])
        qv = embedder.embed_query(q)
        return ps, np.array([float(vecs[p.chunk_id] @ qv) for p in ps])

    ans_best, cos_all, lab_all = [], [], []
    for q in json.loads((PW / "questions.json").read_text()):
        names = set(q["answer"])
        for trace in json.loads(q["solution_traces"]):
            names |= {v for v in trace.values() if isinstance(v, str)}
        ps, cos = top5(q["question"])
        ans_best.append(cos.max())
        cos_all += cos.tolist()
        lab_all += [p.title in names for p in ps]
    una_best = [top5(r["question"])[1].max() for r in load_split("a")[:200]]
    ans_best, una_best = np.array(ans_best), np.array(una_best)
    np.save(CACHE / "pw_ans_best.npy", ans_best)
    np.save(CACHE / "pw_offdomain_best.npy", una_best)
    cos_all, lab_all = np.array(cos_all), np.array(lab_all)
    q = lambda x: " ".join(f"{v:.2f}" for v in np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95]))
    print(f"PhantomWiki answerable n={len(ans_best)} max-cos quantiles 5/25/50/75/95%: {q(ans_best)}")
    print(f"off-domain (HotpotQA) n={len(una_best)} max-cos quantiles:               {q(una_best)}")
    print(f"passage cos: relevant {q(cos_all[lab_all])} | other {q(cos_all[~lab_all])}")
    for name, th in (("OLD", OLD), ("NEW", choice), ("REC", RECOMMENDED)):
        pred = cos_all >= th["relevant"]
        p = (pred & lab_all).sum() / max(pred.sum(), 1)
        r = (pred & lab_all).sum() / max(lab_all.sum(), 1)
        print(
            f"{name} {th['relevant']:.2f}/{th['incorrect']:.2f}/{th['correct']:.2f}: answerable graded incorrect "
            f"{(ans_best < th['incorrect']).mean():.1%}, correct {(ans_best >= th['correct']).mean():.1%}; "
            f"off-domain graded incorrect {(una_best < th['incorrect']).mean():.1%}; passage P {p:.3f} R {r:.3f}"
        )
    print("incorrect-threshold sweep: t  PW answerable<t  off-domain<t")
    for t in (0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.52):
        print(f"    {t:.2f}  {(ans_best < t).mean():6.1%}  {(una_best < t).mean():6.1%}")


if __name__ == "__main__":
    main()
