"""The naive RAG baseline of issue 12: BM25 top-5 paragraphs pasted into one prompt of the same model, "answer
briefly". Same questions and corpus as `cli.py eval` on the dataset, scored with the same metrics.

    .venv/bin/python bench/naive_rag.py ../shared/datasets/hotpotqa_dev_distractor_sample/dev500.jsonl --limit 100
    # the goal runs of docs/benchmarks.md (set A; set B likewise with questions 301-400 first):
    .venv/bin/python bench/naive_rag.py /tmp/dev500-401-500-first.jsonl --limit 100 \\
        --out bench/eval/short-answers-hotpotqa100/naive_rag.jsonl

BM25 is rank_bm25 over the dataset's corpus (title + text, the project's tokenizer); the model is the default
config's LLM (the embedded SmolLM2-135M). Prints one line: EM / F1 / contains / gold-paragraph recall / p50
latency / words per answer; writes one JSON row per question to --out (default bench/out/naive_rag.jsonl), which
bench/short_answers.py --naive reads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (the repository root on sys.path, offline environment)

from switchyard.configs.loader import load_config  # noqa: E402
from switchyard.evaluation.datasets import load_dataset  # noqa: E402
from switchyard.evaluation.metrics import answer_scores, gold_recall  # noqa: E402
from switchyard.llm.factory import build_llm
from switchyard.retrievers.bm25 import Tokenizer  # noqa: E402

PROMPT = "Answer the question briefly, using the passages."


def corpus_paragraphs(paths: list[Path]) -> list[dict]:
    docs = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                docs.append({"doc_id": str(r.get("_id", r.get("id"))), "title": r.get("title", ""), "text": r["text"]})
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--out", default="bench/out/naive_rag.jsonl")
    args = ap.parse_args()
    from rank_bm25 import BM25Okapi

    data = load_dataset(args.dataset, cache_dir=Path(tempfile.gettempdir()) / "switchyard-naive")
    docs = corpus_paragraphs(data.corpus)
    tokenize = Tokenizer()
    bm25 = BM25Okapi([tokenize(f"{d['title']} {d['text']}") for d in docs])
    llm = build_llm(load_config().llm)
    rows = []
    for q in data.questions[: args.limit]:
        started = time.perf_counter()
        scores = bm25.get_scores(tokenize(q.question))
        top = sorted(range(len(docs)), key=lambda i: -scores[i])[:5]
        passages = "\n".join(f"{docs[i]['title']}: {docs[i]['text']}" for i in top)
        prediction = llm.generate(
            [
                {"role": "system", "content": PROMPT},
                {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {q.question}"},
            ]
        )
        rows.append(
            {
                "id": q.id,
                "question": q.question,
                "answers": q.answers,
                "prediction": prediction,
                "latency_ms": (time.perf_counter() - started) * 1e3,
                "gold_recall": gold_recall([docs[i]["doc_id"] for i in top], q.gold_doc_ids),
                **answer_scores(prediction, q.answers, q.is_list),
            }
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    mean = lambda k: statistics.fmean(r[k] for r in rows if r[k] is not None)
    print(
        f"naive RAG (BM25 top-5, one prompt) on {len(rows)} questions: EM {mean('exact_match'):.3f}  "
        f"F1 {mean('f1'):.3f}  contains {mean('contains'):.3f}  gold recall {mean('gold_recall'):.3f}  "
        f"p50 {statistics.median(r['latency_ms'] for r in rows) / 1e3:.1f} s  "
        f"words/answer {statistics.fmean(len(r['prediction'].split()) for r in rows):.1f}"
    )


if __name__ == "__main__":
    main()
