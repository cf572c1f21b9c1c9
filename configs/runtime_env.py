"""Process environment defaults for running fully offline and quietly. Call `apply()` before importing
transformers / sentence-transformers / langchain (each entry point does: cli.py, tests, benchmarks); values a user
has already set win."""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",  # never reach for the hub: models come from installed packages
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",  # no fork warnings from the Rust tokenizer
    "LANGSMITH_TRACING": "false",  # no tracing calls out of LangGraph
    "LANGCHAIN_TRACING_V2": "false",
}


def apply() -> None:
    for var, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(var, value)
