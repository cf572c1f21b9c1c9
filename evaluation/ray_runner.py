"""`switchyard eval --ray ADDRESS`: an evaluation's questions asked by Ray actors; the only module of evaluation/ that
imports Ray.

The driver (evaluation/runner.py's Evaluator) still checks the manifest, ingests the corpora, and writes every row;
only the asking moves. Each actor builds the pipelines of every compared config once (one SharedModels: one
embedding model and one LLM per distinct setting, as in a local run), warms them, then answers (config, run,
question) tasks through the same `ask_row` a local run calls, with the same seed (llm.seed + run). The rows are
therefore those of a local run; only their order in the file and their latencies differ (reports sort rows and do
not depend on latency). The actors read and write the LLM reply cache (--llm-cache) as a local run does: entries are
keyed by the request, so the folder ends up the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import cast

import ray
import ray.exceptions
from ray.actor import ActorClass
from ray.util import ActorPool

from switchyard.configs.schema import SwitchyardConfig
from switchyard.errors import SwitchyardError
from switchyard.evaluation.datasets import EvalQuestion
from switchyard.evaluation.rows import EvalRow
from switchyard.evaluation.runner import (
    ask_row,
    flush_vector_recordings,
    reply_cache_counts,
    summed_counts,
    vector_cache_counts,
)
from switchyard.graphs.pipeline import Pipeline
from switchyard.nodes.resources import SharedModels
from switchyard.retrievers.ray_ingest import cluster_info, connect


@ray.remote(max_restarts=-1, max_task_retries=-1)
class PipelineActor:
    """Warmed pipelines of every compared config, by name."""

    def __init__(self, configs: dict[str, SwitchyardConfig], cwd: str):
        os.chdir(cwd)  # relative paths of the configs (index, reply cache) mean what they mean to the driver
        self.models = SharedModels()
        self.pipes = {name: Pipeline(config, self.models) for name, config in configs.items()}
        for pipe in self.pipes.values():
            pipe.warm_up()

    def ask(self, name: str, run: int, q: EvalQuestion) -> EvalRow:
        row = ask_row(self.pipes[name], name, run, q)
        flush_vector_recordings(self.models)  # its vectors are on disk before the driver writes the row
        return row

    def llm_cache_counts(self) -> dict[str, int] | None:
        return reply_cache_counts(self.models)

    def flush_vectors(self) -> dict[str, int] | None:
        """Write the vectors this actor recorded; what it replayed and recorded."""
        flush_vector_recordings(self.models)
        return vector_cache_counts(self.models)


class RayAsker:
    """An evaluation's Asker on the cluster at `address`: `ray.actors` actors (of the first config's `ray`
    section), each reserving its CPUs and GPUs, questions handed to whichever is free."""

    def __init__(self, address: str):
        connect(address)
        self.cluster = cluster_info()
        self.actors: list = []
        self.size = 0  # actors started (cli.py reports it)
        self.cache_counts: dict[str, int] | None = None  # what the actors replayed and recorded, once closed
        self.vector_counts: dict[str, int] | None = None  # the same for embedding vectors

    def start(self, pipes: dict[str, Pipeline]) -> None:
        configs = {name: pipe.config for name, pipe in pipes.items()}
        r = next(iter(configs.values())).ray
        options = {"num_cpus": r.cpus_per_actor, "num_gpus": r.gpus_per_actor}
        self.size = r.actors
        actors = cast("ActorClass[PipelineActor]", PipelineActor)  # what @ray.remote made of it (mypy keeps the class)
        self.actors = [actors.options(**options).remote(configs, os.getcwd()) for _ in range(r.actors)]

    def rows(self, name: str, items: list[tuple[int, EvalQuestion]]) -> Iterator[EvalRow]:
        pool = ActorPool(self.actors)
        try:
            yield from pool.map_unordered(lambda actor, item: actor.ask.remote(name, *item), items)
        except ray.exceptions.RayTaskError as exc:  # our own error (a reply never recorded): as a local run says it
            if isinstance(exc.cause, SwitchyardError):
                raise exc.cause from None
            raise

    def close(self) -> None:
        self.cache_counts = summed_counts(ray.get([a.llm_cache_counts.remote() for a in self.actors]))
        self.vector_counts = summed_counts(ray.get([a.flush_vectors.remote() for a in self.actors]))
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
