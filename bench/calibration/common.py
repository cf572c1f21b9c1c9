"""Shared helpers for the grade / citation-support calibration (see README.md in this folder).

Everything heavy is cached under CACHE (/tmp/calib): the two HotpotQA indexes, the top-5 retrieval results with
their question-passage cosines, and the sentence vectors for the support calibration.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from configs import runtime_env  # noqa: E402

runtime_env.apply()

DATA = Path(os.environ.get("HOTPOT_DIR", ROOT.parent / "shared" / "datasets" / "hotpotqa_dev_distractor_sample"))
CACHE = Path(os.environ.get("CALIB_CACHE", "/tmp/calib"))
SPLITS = {"a": "dev300_a.jsonl", "b": "dev500.jsonl"}  # a = tuning, b = held-out report split
OLD = {"relevant": 0.3, "incorrect": 0.3, "correct": 0.5, "support": 0.55}
# what the report recommends as the shipped default (see README.md: the pure HotpotQA optimum does not transfer)
RECOMMENDED = {"relevant": 0.35, "incorrect": 0.35, "correct": 0.55, "support": 0.55}


def load_split(name: str) -> list[dict]:
    with open(DATA / SPLITS[name]) as f:
        return [json.loads(line) for line in f]


def paragraphs(records: list[dict]) -> dict[str, str]:
    """title -> paragraph text (first occurrence wins; 2 titles in the union have slightly different texts)."""
    out: dict[str, str] = {}
    for r in records:
        for title, sents in zip(r["context"]["title"], r["context"]["sentences"]):
            out.setdefault(title, "".join(sents).strip())
    return out


def gold_titles(r: dict) -> set[str]:
    return set(r["supporting_facts"]["title"])


def torch_threads(n: int = 1) -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("CALIB_THREADS", n)))


def make_stack(index_name: str, embedder=None):
    from configs.loader import load_config
    from retrievers.pipeline import RetrievalStack

    cfg = load_config(None, [f"store.uri={CACHE / 'index'}", f"store.collection={index_name}"])
    return RetrievalStack(cfg, embedder=embedder)
