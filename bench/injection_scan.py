"""How many chunks of a corpus the injection scorer flags (retrievers/injection.py), per corpus and threshold: the
check that the default policy (`retrieve.injection_policy: exclude` at `retrieve.injection_threshold`) leaves the
evaluation corpora alone. A corpus with no chunk flagged retrieves exactly as with the policy `keep`.

    .venv/bin/python bench/injection_scan.py CORPUS [CORPUS ...] [--threshold 0.6] [--show 5]

Each CORPUS is what `cli.py ingest` / `cli.py eval --corpus` reads (files, folders, JSONL corpora, PhantomWiki
articles.json, a HotpotQA JSON/JSONL whose context paragraphs become the corpus as in evaluation/datasets.py). The
documents are loaded and chunked with the shipped config's loaders and chunker (configs/fixed.yaml: chunk_size 256,
overlap 32, the MiniLM tokenizer), so the chunks are the ones an index holds.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

from switchyard.configs.loader import load_config
from switchyard.evaluation.datasets import load_hotpotqa
from switchyard.retrievers.chunking import Chunker, tokenizer_file_for
from switchyard.retrievers.documents import SourceDocument
from switchyard.retrievers.embedder import resolve_model_dir
from switchyard.retrievers.injection import DEFAULT_THRESHOLD, instruction_features, instruction_score
from switchyard.retrievers.loaders import load_paths


def corpus_paths(path: Path, cache: Path) -> list[Path]:
    if path.is_file() and path.suffix in (".json", ".jsonl") and path.name != "articles.json":
        first = path.read_text(encoding="utf-8")[:4000]
        if '"context"' in first:  # HotpotQA: the context paragraphs are the corpus
            return load_hotpotqa(path, cache).corpus
    return [path]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--show", type=int, default=5, help="flagged or highest-scoring chunks to print per corpus")
    args = parser.parse_args()
    cfg = load_config("configs/fixed.yaml")
    chunker = Chunker(
        cfg.ingest.chunk_size,
        cfg.ingest.chunk_overlap,
        tokenizer_file_for(resolve_model_dir(cfg.embedding.model)),
    )
    print(f"threshold {args.threshold}; chunk_size {cfg.ingest.chunk_size}, overlap {cfg.ingest.chunk_overlap}")
    print("| corpus | documents | chunks | chunks flagged | highest chunk score | features seen (chunks) |")
    print("|---|---|---|---|---|---|")
    worst: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for corpus in args.corpora:
            docs = chunks = flagged = 0
            top: list[tuple[float, str, str]] = []
            features: collections.Counter = collections.Counter()
            for item in load_paths(corpus_paths(corpus, Path(tmp))):
                if not isinstance(item, SourceDocument):
                    continue
                docs += 1
                for chunk in chunker.run(item, ""):
                    chunks += 1
                    score = instruction_score(chunk.text)
                    features.update(instruction_features(chunk.text).keys())
                    flagged += score >= args.threshold
                    if score > 0:
                        top.append((score, chunk.title, " ".join(chunk.text.split())[:160]))
            top.sort(key=lambda t: -t[0])
            worst[str(corpus)] = top[: args.show]
            seen = ", ".join(f"{k} {v}" for k, v in features.most_common()) or "–"
            print(f"| {corpus} | {docs} | {chunks} | {flagged} | {top[0][0] if top else 0:.2f} | {seen} |")
    for corpus, top in worst.items():
        if top:
            print(f"\n{corpus}: highest-scoring chunks")
            for score, title, text in top:
                print(f"  {score:.2f} {title}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
