"""Ingestion on a Ray cluster (`switchyard ingest --ray ADDRESS`); the only module of retrievers/ that imports Ray.

Only the orchestration differs from a local ingest: Ingestor.run (retrievers/ingest.py) still decides what is new,
changed, unchanged or gone, and commits each batch through IndexStore.write_documents, in this process (the driver).
A Ray Data pipeline does the work in between, with the same functions a local ingest calls:
- reading and cleaning: one task per file (`load_documents`);
- chunking and embedding: `prepare_batch` in an actor pool (`ray.actors` actors, each loading the embedding model
  once and reserving `ray.cpus_per_actor` CPUs and `ray.gpus_per_actor` GPUs).
Both stages keep their input order, so the batches are committed in the order, and with the contents, of a local
ingest: the collection is the same, row for row. Ray retries the work of an actor or task that dies (Ray Data
restarts its actors and resubmits their tasks); nothing is written by the workers, so a driver killed mid-ingest
leaves the collection at its last commit, each document as it was or fully replaced, like a local ingest.
"""

from __future__ import annotations

import logging
import math
import pickle
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import ray
import ray.data

from switchyard.configs.schema import SwitchyardConfig
from switchyard.retrievers.chunking import Chunker, SentenceWindows
from switchyard.retrievers.ingest import FieldEncoder, PreparedBatch, load_documents, prepare_batch
from switchyard.retrievers.stack import field_embedder_settings
from switchyard.retrievers.vector_recording import build_embedder


def connect(address: str) -> None:
    """Join the cluster at `address` (`auto`: the one started on this machine), once per process."""
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, configure_logging=False)


def cluster_info() -> dict:
    """What an evaluation manifest records about the cluster: Ray's version, the live nodes and their resources."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {
        "ray": ray.__version__,
        "nodes": len(nodes),
        "resources": {k: v for k, v in sorted(ray.cluster_resources().items()) if not k.startswith("node:")},
    }


def embedding_settings(config: SwitchyardConfig) -> dict:
    """The embedder an actor builds: the config's, on the GPU when the actor has one, and with as many threads as
    the CPUs it reserves unless embedding.threads says otherwise (two actors on a node do not fight for cores)."""
    settings = config.embedding.model_dump()
    if config.ray.gpus_per_actor:
        settings["device"] = "cuda"
    if settings["threads"] is None and settings["backend"] != "torch":
        settings["threads"] = max(1, math.floor(config.ray.cpus_per_actor))
    return settings


class BatchPreparer:
    """A Ray Data actor: the embedding model loaded once, then `prepare_batch` on every batch it is given."""

    def __init__(
        self,
        embedding: dict,
        chunk_size: int,
        chunk_overlap: int,
        windows: tuple[int, int] | None,
        fields: dict[str, tuple[dict, str]] | None = None,
    ):
        """`fields`: name -> (embedder settings, passage prefix) of each vector field the collection holds."""
        self.embedder = build_embedder(**embedding)
        self.embedder.warm_up()
        self.fields = {
            name: FieldEncoder(build_embedder(**settings), prefix)
            for name, (settings, prefix) in (fields or {}).items()
        }
        self.chunker = Chunker(chunk_size, chunk_overlap, self.embedder.tokenizer_file)
        self.windows = SentenceWindows(*windows, self.embedder.tokenizer_file) if windows else None

    def __call__(self, rows: dict) -> dict:
        prepared = [
            pickle.dumps(prepare_batch(pickle.loads(b), self.chunker, self.embedder, self.windows, self.fields))
            for b in rows["batch"]
        ]
        return {"prepared": np.array(prepared, dtype=object)}


def _load_row(row: dict) -> dict:
    return {"docs": pickle.dumps(load_documents(Path(row["path"])))}


class RayExecutor:
    """Reads and prepares an ingest's files on the cluster (see the module docstring); an IngestExecutor."""

    def __init__(
        self,
        config: SwitchyardConfig,
        windows: tuple[int, int] | None,
        progress: bool = False,
        fields: Iterable[str] = (),
    ):
        """`windows` and `fields`: what the collection holds (IndexStore.windows, IndexStore.vector_fields)."""
        self.config = config
        self.windows = windows
        self.fields = list(fields)
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes (progress bars off, ...) are not ours
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True  # results in input order: the commits of a local ingest
        context.enable_progress_bars = progress
        context.print_on_execution_start = False

    def load(self, files: list[Path]):
        if not files:
            return iter(())
        items = [{"path": str(f.resolve())} for f in files]  # the workers may run elsewhere
        ds = ray.data.from_items(items, override_num_blocks=len(items)).map(_load_row)
        return (pickle.loads(row["docs"]) for row in ds.iter_rows())

    def prepare(self, batches: list[list]):
        if not batches:
            return iter(())
        r, ingest = self.config.ray, self.config.ingest
        items = [{"batch": pickle.dumps(b)} for b in batches]
        ds = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            BatchPreparer,
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=min(r.actors, len(items))),
            num_cpus=r.cpus_per_actor,
            num_gpus=r.gpus_per_actor or None,
            batch_format="numpy",
            fn_constructor_kwargs={
                "embedding": embedding_settings(self.config),
                "chunk_size": ingest.chunk_size,
                "chunk_overlap": ingest.chunk_overlap,
                "windows": self.windows,
                "fields": self._field_settings(),
            },
        )
        return (_prepared(row["prepared"]) for row in ds.iter_rows())

    def _field_settings(self) -> dict[str, tuple[dict, str]]:
        configured = self.config.retrieve.retrievers.fields()
        return {
            name: (
                field_embedder_settings(embedding_settings(self.config), configured[name]),
                configured[name].passage_prefix,
            )
            for name in self.fields
        }


def _prepared(data: bytes) -> PreparedBatch:
    return pickle.loads(data)
