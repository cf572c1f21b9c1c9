"""Step 4 (sanity check): how the old and new values behave on the project's own sample corpus and test questions.

Ingests samples/corpus into CACHE/index (collection `sample`), then prints for the questions used in
tests/graphs/test_build.py the top-5 question-passage cosines (what the `score` grader sees, no rewrite), and the
support scores of the sentences in tests/nodes/test_citations.py against their passages.

    .venv/bin/python bench/calibration/04_sample_check.py

Needs CACHE/grade_choice.json and CACHE/support_choice.json (steps 2 and 3). Prints one line per question (max
cosine, old and new verdicts) and the support scores per test sentence and passage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for common.py
from common import CALIBRATION_CACHE as CACHE  # noqa: E402
from common import RECOMMENDED, ROOT, make_stack, torch_threads

QUESTIONS = {  # question -> expected to be answerable from the sample corpus
    "Who patented the knuckle coupler?": True,
    "What is standard gauge?": True,
    "What do blue flags protect?": True,
    "What colour is the sky?": False,
    "What is the recipe for a chocolate soufflé?": False,
}


def main() -> None:
    torch_threads()
    from switchyard.nodes.citations import support_matrix
    from switchyard.retrievers.embedder import Embedder
    from switchyard.retrievers.store import ChunkFetch
    from switchyard.run_context import ALL
    from tests.nodes.test_citations import PASSAGES

    embedder = Embedder("minilm")
    stack = make_stack("sample", embedder)
    stack.ingestor(progress=False).run([ROOT / "samples" / "corpus"])
    choice = {
        **json.loads((CACHE / "grade_choice.json").read_text()),
        **json.loads((CACHE / "support_choice.json").read_text()),
    }
    print(f"new values: {choice}")
    for q, answerable in QUESTIONS.items():
        ps = stack.search(q, groups=ALL).passages
        vecs = ChunkFetch(stack.store).vectors([p.chunk_id for p in ps])
        cos = [float(vecs[p.chunk_id] @ embedder.embed_query(q)) for p in ps]
        best = max(cos)

        def verdict(inc, cor):
            return "correct" if best >= cor else "incorrect" if best < inc else "ambiguous"  # noqa: B023

        print(
            f"{q!r:48} answerable={answerable!s:5} max cos {best:.3f}  old: {verdict(0.3, 0.5):9}  "
            f"new: {verdict(choice['incorrect'], choice['correct']):9}  "
            f"recommended: {verdict(RECOMMENDED['incorrect'], RECOMMENDED['correct']):9}  top-5 cos "
            + " ".join(f"{c:.2f}" for c in cos)
        )
    sentences = [
        "Eli Janney patented the coupler in 1873.",
        "Standard gauge is 1,435 mm.",
        "Bananas are yellow fruit.",
        "Eli Janney invented the steam locomotive in 1873.",
        "He also flew to the moon.",
        "Janney later became president of France.",
    ]
    m = np.array(support_matrix(sentences, PASSAGES, embedder))
    print(
        f"\nsupport (tests/nodes/test_citations.py passages: {[p['doc_id'] for p in PASSAGES]}); old 0.55, new "
        f"{choice['support']}"
    )
    for s, row in zip(sentences, m):
        print(f"  {s:52} " + "  ".join(f"{v:.3f}" for v in row))


if __name__ == "__main__":
    main()
