"""Runs several pipeline configs over one dataset, N times each, one JSON line per (config, run, question).

The corpus is ingested once per distinct collection (named by the corpus hash and the ingest settings) and reused.
Lines are appended and flushed as they are produced, so an interrupted evaluation resumes where it stopped: the
(config, run, question) triples already in `questions.jsonl` are skipped.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from configs.loader import load_config
from configs.schema import SwitchyardConfig
from evaluation.datasets import EvalQuestion, EvalSet
from evaluation.metrics import answer_scores, citation_precision, gold_recall
from graphs.app import Pipeline
from nodes.resources import Resources
from retrievers.ingest import corpus_collection

if TYPE_CHECKING:
    from evaluation.faithfulness import FaithfulnessJudge

RESULTS = "questions.jsonl"


def read_results(path: Path) -> list[dict]:
    """Every complete line; a torn last line (killed mid-write) is ignored and will be redone."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def drop_torn_tail(path: Path) -> None:
    """Cut a last line that a killed run left half-written, so appending starts on a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


ERROR_SCORES = {"exact_match": 0.0, "f1": 0.0, "contains": 0.0, "gold_recall": None, "citation_precision": None}


def drop_error_lines(path: Path) -> int:
    """Remove the lines of questions that failed, so a resumed run asks them again. Written to a temporary file
    and renamed over the original, so a kill midway loses nothing. Returns how many were removed."""
    if not path.exists():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [line for line in lines if not json.loads(line).get("error")]
    if len(keep) < len(lines):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(keep), encoding="utf-8")
        os.replace(tmp, path)
    return len(lines) - len(keep)


def _shared_key(section) -> str:
    """Key of a loaded model in the evaluation's cache: the config section that builds it, in full."""
    return f"{type(section).__name__}:{section.model_dump_json()}"


def score_row(row: dict) -> dict:
    """Answer and grounding metrics of one result line, from what the line stores. Reports recompute them, so a
    metric fix applies to finished evaluations without re-running the pipelines."""
    if row.get("error"):
        return dict(ERROR_SCORES)
    scores = answer_scores("" if row["abstained"] else row["prediction"], row["answers"], row["is_list"])
    return {**scores,
            "gold_recall": gold_recall(row.get("retrieved_doc_ids", []), row["gold_doc_ids"]),
            "citation_precision": citation_precision([c["doc_id"] for c in row.get("citations", [])],
                                                     row["gold_doc_ids"])}


class Evaluator:
    def __init__(self, dataset: EvalSet, config_paths: list[Path], out_dir: Path, runs: int = 1,
                 limit: int | None = None, index_dir: Path | None = None, overrides: list[str] | None = None):
        if runs < 1:
            raise ValueError("runs must be >= 1")
        self.dataset = dataset
        self.config_paths = [Path(p) for p in config_paths]
        names = [p.stem for p in self.config_paths]
        if len(set(names)) != len(names):
            raise ValueError(f"config names must differ: {names}")
        self.out_dir = Path(out_dir)
        self.runs = runs
        self.questions = dataset.questions[:limit] if limit else dataset.questions
        self.index_dir = Path(index_dir) if index_dir else self.out_dir / "index"
        self.overrides = list(overrides or [])
        self._ingested: set[str] = set()
        self._shared: dict[str, object] = {}

    def _pipeline(self, path: Path) -> Pipeline:
        base = load_config(path, self.overrides)
        collection = corpus_collection(self.dataset.corpus, base.ingest.chunk_size, base.ingest.chunk_overlap,
                                       base.embedding.model)
        config = load_config(path, [*self.overrides, f"store.uri={self.index_dir}", f"store.collection={collection}"])
        (self.out_dir / "configs").mkdir(parents=True, exist_ok=True)
        (self.out_dir / "configs" / f"{path.stem}.yaml").write_text(
            yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
        res = Resources(config)
        # one embedding model and one LLM per distinct setting, shared by every config of the run
        embed_key, llm_key = _shared_key(config.embedding), _shared_key(config.llm)
        if embed_key in self._shared:
            res.stack.__dict__["embedder"] = self._shared[embed_key]
        else:
            self._shared[embed_key] = res.stack.embedder
        if llm_key in self._shared:
            res.__dict__["llm"] = self._shared[llm_key]
        if config.graph.mode != "closed_book" and collection not in self._ingested:
            report = res.stack.ingestor(progress=False).run(self.dataset.corpus)
            if report.ingested == 0:
                raise ValueError(f"nothing could be ingested from {self.dataset.corpus}: {report.errors[:1]}")
            self._ingested.add(collection)
        return Pipeline(config, res)

    def run(self, progress: bool | None = None, retry_errors: bool = False) -> Path:
        """Ask every (config, run, question) not yet in the results; with `retry_errors`, also those that failed."""
        from tqdm import tqdm

        self.out_dir.mkdir(parents=True, exist_ok=True)
        results = self.out_dir / RESULTS
        drop_torn_tail(results)
        if retry_errors:
            drop_error_lines(results)
        done = {(r["config"], r["run"], r["id"]) for r in read_results(results)}
        total = len(self.config_paths) * self.runs * len(self.questions)
        bar = tqdm(total=total, initial=len(done), desc="eval", unit="q", disable=not progress)
        with results.open("a", encoding="utf-8") as out:
            for path in self.config_paths:
                todo = [(run, q) for run in range(self.runs) for q in self.questions
                        if (path.stem, run, q.id) not in done]
                if not todo:
                    continue
                pipe = self._pipeline(path)
                for run, q in todo:
                    row = self._ask(pipe, path.stem, run, q)
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    out.flush()
                    bar.update(1)
                if "llm" in pipe.resources.__dict__:  # built on first use; later configs reuse it
                    self._shared.setdefault(_shared_key(pipe.config.llm), pipe.resources.llm)
        bar.close()
        return results

    def faithfulness_judge(self, llm_config) -> "FaithfulnessJudge":
        """A judge on `llm_config`, reusing the evaluation's loaded model when the settings are the same."""
        from evaluation.faithfulness import FaithfulnessJudge, judge_name
        from nodes.llm import build_llm

        llm = self._shared.get(_shared_key(llm_config)) or build_llm(llm_config)
        return FaithfulnessJudge(llm, judge_name(llm_config))

    def _ask(self, pipe: Pipeline, name: str, run: int, q: EvalQuestion) -> dict:
        backend = getattr(pipe.resources.llm, "backend", None)
        if backend is not None and hasattr(backend, "seed"):
            backend.seed = pipe.config.llm.seed + run  # runs differ when temperature > 0
        base = {"config": name, "run": run, "id": q.id, "question": q.question, "answers": q.answers,
                "is_list": q.is_list, "difficulty": q.difficulty, "type": q.type, "gold_doc_ids": q.gold_doc_ids}
        started = time.perf_counter()
        try:
            result = pipe.ask(q.question)
        except Exception as exc:  # one failing question never stops the evaluation; it is counted
            return {**base, "prediction": "", "abstained": False, "error": f"{type(exc).__name__}: {exc}",
                    "latency_ms": (time.perf_counter() - started) * 1e3, **ERROR_SCORES, "llm_calls": 0,
                    "prompt_tokens": 0, "completion_tokens": 0, "parse_fallbacks": 0, "guards": {}}
        usage = result["usage"]
        row = {**base, "prediction": result["answer"], "abstained": result["abstained"], "error": None,
               "latency_ms": (time.perf_counter() - started) * 1e3,
               "llm_calls": usage.get("llm_calls", 0), "prompt_tokens": usage.get("prompt_tokens", 0),
               "completion_tokens": usage.get("completion_tokens", 0),
               "parse_fallbacks": result["failures"]["parse_fallbacks"], "guards": result["failures"]["guards"],
               "retrieved_doc_ids": result.get("retrieved_doc_ids", []), "citations": result["citations"],
               "steps": result["steps"], "trace": result["trace"]}
        return {**row, **score_row(row)}
