"""ONNX Runtime sessions as Switchyard runs its models (the embedder's onnx backend, cross-encoder files): the CPU
execution provider, every graph optimisation, warnings only, `threads` intra-op threads (None: ONNX Runtime's
default, one per core) and one inter-op thread. Needs the `onnx` extra; callers check it first."""

from __future__ import annotations

from pathlib import Path


def cpu_session(path: str | Path, threads: int | None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
