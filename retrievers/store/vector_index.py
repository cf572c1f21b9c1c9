"""The ANN vector index of a vector column, as `store.vector_index` (configs/schema.py `VectorIndexConfig`, checked
there once) describes it: how it is built past `store.vector_index_min_rows` vectors, and how searches use it.
Measured by bench/scale.py (recall@10 against exact search, p50 latency, build time at 100k and 1M chunks)."""

from __future__ import annotations

import math

from switchyard.configs.schema import VectorIndexConfig

# LanceDB's multivector search asks the HNSW graph for this many window hits per chunk asked for, and refuses an `ef`
# below that (measured: k 7 / 50 / 100 need ef >= 70 / 500 / 1000)
MULTIVECTOR_HITS_PER_K = 10


def partitions(config: VectorIndexConfig, rows: int) -> int:
    """IVF partitions for `rows` vectors: the configured number, or automatic (0)."""
    if config.num_partitions:
        return config.num_partitions
    if config.kind == "ivf_hnsw_sq":
        return max(1, rows // 50_000)
    return max(1, round(math.sqrt(rows)))


def index_config(config: VectorIndexConfig, rows: int, dim: int):
    """The LanceDB index configuration for a column of `rows` vectors of dimension `dim`."""
    from lancedb.index import IvfHnswSq, IvfPq

    if config.kind == "ivf_hnsw_sq":
        return IvfHnswSq(distance_type="cosine", num_partitions=partitions(config, rows))
    sub_vectors = config.num_sub_vectors or max(1, dim // 8)
    if dim % sub_vectors:
        raise ValueError(f"num_sub_vectors {sub_vectors} must divide the vector dimension {dim}")
    return IvfPq(distance_type="cosine", num_partitions=partitions(config, rows), num_sub_vectors=sub_vectors)


def tune(config: VectorIndexConfig, query, min_ef: int = 0):
    """Apply the search settings to a LanceDB vector query (without an index they change nothing); a set `ef` is
    raised to `min_ef` where the search needs that many candidates."""
    if config.nprobes:
        query = query.nprobes(config.nprobes)
    if config.refine_factor:
        query = query.refine_factor(config.refine_factor)
    if config.ef:
        query = query.ef(max(config.ef, min_ef))
    return query
