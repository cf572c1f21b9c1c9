"""Runs several pipeline configs over one dataset, N times each, one JSON line per (config, run, question).

The corpus is ingested once per distinct collection (named by the corpus hash and the ingest settings) and reused.
Lines are appended and flushed as they are produced, so an interrupted evaluation resumes where it stopped: the
(config, run, question) triples already in `questions.jsonl` are skipped. With `workers` > 1, that many questions
of a config are in flight at once through its one `Pipeline` (threads); each question's seed is llm.seed + run,
whatever the schedule, so the rows are those of a sequential run (their order in the file may differ; reports
sort them).

Before the first question is asked, the run's manifest (evaluation/manifest.py) is compared with the folder's: a
resume under a different setup (code, models, prompts, configs, collections, ...) is refused unless `allow_mixed`.
With `llm.cache_dir` (eval --llm-cache), LLM replies are recorded or, under `llm.replay`, replayed; a request that
was never recorded stops the evaluation (it is not counted as a failed question). `embedding.vector_cache` (eval
--vector-cache) does the same for embedding vectors (retrievers/vector_recording.py); the vectors recorded are
written when the evaluation ends, however it ends (an error, Ctrl-C, or a SIGTERM to `switchyard eval`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Protocol

import yaml

from switchyard.configs.loader import load_config
from switchyard.configs.schema import SwitchyardConfig
from switchyard.errors import DatasetError, LLMCacheMiss, VectorCacheMiss
from switchyard.evaluation import manifest as run_manifest
from switchyard.evaluation.datasets import EvalQuestion, EvalSet
from switchyard.evaluation.faithfulness import FaithfulnessJudge, judge_name
from switchyard.evaluation.jsonl import drop_error_lines, drop_torn_tail
from switchyard.evaluation.rows import ERROR_SCORES, RESULTS, EvalRow, read_rows
from switchyard.graphs.pipeline import Pipeline
from switchyard.llm.cache import CachingBackend
from switchyard.nodes.resources import SharedModels
from switchyard.retrievers.stack import corpus_collection_for
from switchyard.retrievers.vector_recording import RecordingEmbedder


class Asker(Protocol):
    """Who asks an evaluation's questions: `start` with the pipelines (by config name) once, then `rows` for the
    (run, question) pairs of one config, yielded as they are answered, and `close` at the end. `cluster`: what
    the manifest records about where the questions were asked (None: this process)."""

    cluster: dict | None

    def start(self, pipes: dict[str, Pipeline]) -> None: ...

    def rows(self, name: str, items: list[tuple[int, EvalQuestion]]) -> Iterator[EvalRow]: ...

    def close(self) -> None: ...


class ThreadedAsker:
    """`workers` questions at once in this process, through each config's one Pipeline."""

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval")
        self.pipes: dict[str, Pipeline] = {}
        self.cluster: dict | None = None

    def start(self, pipes: dict[str, Pipeline]) -> None:
        self.pipes = pipes

    def rows(self, name: str, items: list[tuple[int, EvalQuestion]]) -> Iterator[EvalRow]:
        futures = [self.pool.submit(ask_row, self.pipes[name], name, run, q) for run, q in items]
        return (future.result() for future in as_completed(futures))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class Evaluator:
    def __init__(
        self,
        dataset: EvalSet,
        config_paths: list[Path],
        out_dir: Path,
        runs: int = 1,
        limit: int | None = None,
        index_dir: Path | None = None,
        overrides: list[str] | None = None,
        allow_mixed: bool = False,
    ):
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
        self.limit = limit
        self.allow_mixed = allow_mixed
        self.manifest: dict | None = None  # the folder's manifest after run() (None: results predate manifests)
        self.unasked_changes: list[str] = []  # with nothing left to ask: how this setup differs from the folder's
        self._configs: dict[Path, SwitchyardConfig] = {}
        self._ingested: set[str] = set()
        self.models = SharedModels()  # one embedding model and one LLM per distinct setting, for every config
        self.asked = 0  # questions asked by the last run()
        self.answering_s = 0.0  # their wall time, pipelines built and corpora ingested excluded

    def _config(self, path: Path) -> SwitchyardConfig:
        """The config as the evaluation runs it: on the collection of this corpus under these ingest settings."""
        if path not in self._configs:
            base = load_config(path, self.overrides)
            collection = corpus_collection_for(base, self.dataset.corpus)
            self._configs[path] = load_config(
                path, [*self.overrides, f"store.uri={self.index_dir}", f"store.collection={collection}"]
            )
        return self._configs[path]

    def _pipeline(self, path: Path) -> Pipeline:
        config = self._config(path)
        (self.out_dir / "configs").mkdir(parents=True, exist_ok=True)
        (self.out_dir / "configs" / f"{path.stem}.yaml").write_text(
            yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
        )
        pipeline = Pipeline(config, self.models)
        res = pipeline.resources
        if config.graph.mode != "closed_book":
            if config.store.collection not in self._ingested:
                report = res.stack.ingestor(progress=False).run(self.dataset.corpus)
                if report.ingested == 0:
                    first = report.errors[0] if report.errors else "no documents"
                    raise DatasetError(
                        f"nothing could be ingested from {', '.join(map(str, self.dataset.corpus))} "
                        f"into {self.index_dir}: {first}"
                    )
                self._ingested.add(config.store.collection)
                flush_vector_recordings(self.models)  # an index on disk has its vectors on disk, however this ends
            assert self.manifest is not None  # run() records the setup before it builds a pipeline
            recorded = run_manifest.with_collection(self.manifest, run_manifest.collection_entry(res.stack.store))
            self._record(run_manifest.with_embedding(recorded, path.stem, res.stack.embedder.runtime))
        return pipeline

    def _record(self, manifest: dict) -> None:
        """Join `manifest` to the folder's (refused when the setups differ, unless allow_mixed)."""
        self.manifest = run_manifest.resume(self.out_dir, manifest, self.allow_mixed)

    def run(
        self, progress: bool | None = None, retry_errors: bool = False, workers: int = 1, asker: Asker | None = None
    ) -> Path:
        """Ask every (config, run, question) not yet in the results; with `retry_errors`, also those that failed.
        `workers` questions are asked at once (one pipeline per config, shared by the worker threads); `asker`
        asks them elsewhere instead (evaluation/ray_runner.py: on a Ray cluster). Whoever asks, the rows are
        written here, by this process."""
        from tqdm import tqdm

        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.asked, self.answering_s = 0, 0.0
        self.out_dir.mkdir(parents=True, exist_ok=True)
        results = self.out_dir / RESULTS
        drop_torn_tail(results)
        rows = read_rows(results)
        done = {r.key for r in rows if not (retry_errors and r.error)}
        todo = {
            path: [(run, q) for run in range(self.runs) for q in self.questions if (path.stem, run, q.id) not in done]
            for path in self.config_paths
        }
        todo = {path: items for path, items in todo.items() if items}
        self.manifest = run_manifest.read(self.out_dir)
        current = run_manifest.build(
            {p.stem: self._config(p) for p in self.config_paths},
            self.dataset.source,
            self.runs,
            self.limit,
            self.out_dir,
        )
        asker = asker or ThreadedAsker(workers)
        if asker.cluster:
            current = run_manifest.with_cluster(current, asker.cluster)
        if todo:  # the setup is checked, and every collection ingested, before the first question
            self._record(current)
        if retry_errors and any(r.error for r in rows):  # failed rows are dropped once the setup is accepted
            drop_error_lines(results)
        elif self.manifest is not None:  # a report of finished results: nothing is mixed, but say what differs
            self.unasked_changes = run_manifest.changes(self.manifest, current)
        pipes = {path: self._pipeline(path) for path in todo}
        total = len(self.config_paths) * self.runs * len(self.questions)
        bar = tqdm(total=total, initial=len(done), desc="eval", unit="q", disable=not progress)
        try:
            if todo:
                asker.start({path.stem: pipes[path] for path in todo})
            with results.open("a", encoding="utf-8") as out:
                for path, todo_here in todo.items():
                    started = time.perf_counter()
                    for row in asker.rows(path.stem, todo_here):  # one writer: lines never interleave
                        flush_vector_recordings(self.models)  # a row on disk never outlives its vectors
                        out.write(json.dumps(row.to_json(), ensure_ascii=False) + "\n")
                        out.flush()
                        bar.update(1)
                    self.asked += len(todo_here)
                    self.answering_s += time.perf_counter() - started
        finally:
            # the vectors first: every row written keeps its vectors even when waiting for the questions in flight
            # is cut short (their rows are not written; a resume asks them again)
            flush_vector_recordings(self.models)
            asker.close()  # on an interrupt, questions not started are dropped
            bar.close()
        return results

    def faithfulness_judge(self, llm_config) -> FaithfulnessJudge:
        """A judge on `llm_config`, reusing the evaluation's loaded model when the settings are the same."""
        return FaithfulnessJudge(self.models.llm(llm_config), judge_name(llm_config))

    def llm_cache_counts(self) -> dict[str, int] | None:
        """LLM replies replayed from and recorded into the reply cache so far (None: no cache in use)."""
        return reply_cache_counts(self.models)

    def vector_cache_counts(self) -> dict[str, int] | None:
        """Vectors replayed from and recorded into the vector recording so far (None: no recording in use)."""
        return vector_cache_counts(self.models)


def _recordings(models: SharedModels) -> list:
    return [m.recording for m in models.loaded() if isinstance(m, RecordingEmbedder)]


def flush_vector_recordings(models: SharedModels) -> None:
    """Write the vectors `models`' embedders recorded and have not written yet."""
    for recording in _recordings(models):
        recording.flush()


def vector_cache_counts(models: SharedModels) -> dict[str, int] | None:
    """What the vector recordings of `models`' embedders replayed and recorded so far (None: none in use)."""
    return _tally(_recordings(models))


def _tally(caches: list) -> dict[str, int] | None:
    """The `replayed` and `recorded` counters of reply caches or vector recordings, summed (None: none)."""
    return summed_counts([{"replayed": c.replayed, "recorded": c.recorded} for c in caches])


def summed_counts(counts: list[dict[str, int] | None]) -> dict[str, int] | None:
    """`replayed`/`recorded` counts from several processes added up; None entries had no cache (None: none had)."""
    present = [c for c in counts if c is not None]
    return {key: sum(c[key] for c in present) for key in ("replayed", "recorded")} if present else None


def reply_cache_counts(models: SharedModels) -> dict[str, int] | None:
    """What the reply caches of `models`' LLMs replayed and recorded so far (None: no cache in use)."""
    return _tally([b for b in (getattr(x, "backend", None) for x in models.loaded()) if isinstance(b, CachingBackend)])


def ask_row(pipe: Pipeline, name: str, run: int, q: EvalQuestion) -> EvalRow:
    """One (config, run, question) row: the question asked through `pipe`, scored; a failure is a row too."""
    base = {
        "config": name,
        "run": run,
        "id": q.id,
        "question": q.question,
        "answers": q.answers,
        "is_list": q.is_list,
        "difficulty": q.difficulty,
        "type": q.type,
        "gold_doc_ids": q.gold_doc_ids,
        **({"attack": q.attack} if q.attack is not None else {}),
        **({"turn": q.turn, "history_messages": len(q.history)} if q.turn is not None else {}),
    }
    started = time.perf_counter()
    try:
        # runs differ at temperature > 0; a conversation's turn is asked after the dataset's own earlier turns
        result = pipe.ask(
            q.question,
            history=q.history or None,
            standalone=q.rewrite if q.turn is not None else None,
            seed=pipe.config.llm.seed + run,
        )
    except (LLMCacheMiss, VectorCacheMiss):  # a replay that cannot go on: not a failure of the pipeline
        raise
    except Exception as exc:  # one failing question never stops the evaluation; it is counted
        return EvalRow(
            **base,
            prediction="",
            abstained=False,
            error=f"{type(exc).__name__}: {exc}",
            latency_ms=(time.perf_counter() - started) * 1e3,
            **ERROR_SCORES,
            llm_calls=0,
            prompt_tokens=0,
            completion_tokens=0,
            parse_fallbacks=0,
            guards={},
        )
    latency_ms = (time.perf_counter() - started) * 1e3
    # the open-ended records as JSON, without dumping the whole result (its resolved config) per question
    data = result.model_dump(mode="json", include={"grounding", "citations", "steps", "trace"})
    # what the user reads first is scored: the short answer when one is shown, else the answer text
    row = EvalRow(
        **base,
        prediction=result.short_answer or result.answer,
        answer=result.answer,
        evidence=result.evidence,
        grounding=data["grounding"],
        abstained=result.abstained,
        error=None,
        latency_ms=latency_ms,
        llm_calls=result.usage.llm_calls,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        parse_fallbacks=result.failures.parse_fallbacks,
        guards=dict(result.failures.guards),
        retrieved_doc_ids=result.retrieved_doc_ids,
        citations=data["citations"],
        steps=data["steps"],
        trace=data["trace"],
        **({"trace_id": result.trace_id} if result.trace_id else {}),
        **({"standalone": result.standalone} if result.standalone else {}),
        **({"cached_calls": result.usage.cached_calls} if result.usage.cached_calls else {}),
    )
    return row.rescored()
