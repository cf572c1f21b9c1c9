"""Switchyard: a static-graph RAG pipeline with an optional agentic mode, as a library.

The public API is re-exported here; names load on first use (PEP 562), so `import switchyard` stays cheap and
pulls in no model runtime, LangGraph or LanceDB until a name that needs them is touched:

    from switchyard import Pipeline, load_config
    answer = Pipeline(load_config("fixed")).ask("Who patented the knuckle coupler?")

Installed, every layer lives under this package (`switchyard.graphs`, `switchyard.nodes`, `switchyard.retrievers`,
`switchyard.llm`, `switchyard.configs`, `switchyard.evaluation`, `switchyard.service`); in the repository they are
the top-level folders, which packaging maps in (pyproject.toml). Importing or using the library changes nothing in
the host process: no environment variable, thread, logging handler or OpenTelemetry provider is set up by it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # configuration
    "load_config": "switchyard.configs.loader",
    "SwitchyardConfig": "switchyard.configs.schema",
    # the pipeline and what it returns
    "Pipeline": "switchyard.graphs.pipeline",
    "build_graph": "switchyard.graphs.build",
    "AskResult": "switchyard.graphs.results",
    "Citation": "switchyard.nodes.citations",
    "Paused": "switchyard.graphs.results",
    "PendingAction": "switchyard.graphs.results",
    "StreamEvent": "switchyard.graphs.results",
    "TraceEntry": "switchyard.graphs.results",
    "Usage": "switchyard.graphs.results",
    "Approval": "switchyard.nodes.approve",
    "RunContext": "switchyard.run_context",
    "ALL": "switchyard.run_context",  # the access scope that reads every document (closed by default otherwise)
    "SharedModels": "switchyard.nodes.resources",
    # retrieval and ingestion
    "Passage": "switchyard.retrievers.documents",
    "RetrievalStack": "switchyard.retrievers.stack",
    "SwitchyardRetriever": "switchyard.graphs.langchain_retriever",
    # evaluation
    "load_dataset": "switchyard.evaluation.datasets",
    "Evaluator": "switchyard.evaluation.runner",
    # the error family (each class carries its exit code and HTTP status)
    "SwitchyardError": "switchyard.errors",
    "UsageError": "switchyard.errors",
    "ConfigError": "switchyard.errors",
    "FilterError": "switchyard.errors",
    "AccessError": "switchyard.errors",
    "QuestionError": "switchyard.errors",
    "StoreError": "switchyard.errors",
    "CollectionNotFound": "switchyard.errors",
    "LLMError": "switchyard.errors",
    "ContextOverflowError": "switchyard.errors",
    "RunCancelled": "switchyard.errors",
    "ApprovalError": "switchyard.errors",
    "UnknownThread": "switchyard.errors",
    "PauseExpired": "switchyard.errors",
    "MissingExtra": "switchyard.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'switchyard' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from switchyard.configs.loader import load_config
    from switchyard.configs.schema import SwitchyardConfig
    from switchyard.errors import (
        AccessError,
        ApprovalError,
        CollectionNotFound,
        ConfigError,
        ContextOverflowError,
        FilterError,
        LLMError,
        MissingExtra,
        PauseExpired,
        QuestionError,
        RunCancelled,
        StoreError,
        SwitchyardError,
        UnknownThread,
        UsageError,
    )
    from switchyard.evaluation.datasets import load_dataset
    from switchyard.evaluation.runner import Evaluator
    from switchyard.graphs.build import build_graph
    from switchyard.graphs.langchain_retriever import SwitchyardRetriever
    from switchyard.graphs.pipeline import Pipeline
    from switchyard.graphs.results import AskResult, Paused, PendingAction, StreamEvent, TraceEntry, Usage
    from switchyard.nodes.approve import Approval
    from switchyard.nodes.citations import Citation
    from switchyard.nodes.resources import SharedModels
    from switchyard.retrievers.documents import Passage
    from switchyard.retrievers.stack import RetrievalStack
    from switchyard.run_context import ALL, RunContext
