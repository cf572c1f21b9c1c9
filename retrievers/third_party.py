"""Imports of third-party modules that change the process environment as a side effect, undone.

NLTK (llama-index's sentence splitter, the `rank_bm25` backend's stemmer) imports scikit-learn, which sets
`KMP_DUPLICATE_LIB_OK` and `KMP_INIT_AT_FORK` in `os.environ` when it is imported. A library must leave its host's
environment as it found it, so these imports go through `import_keeping_environment`.
"""

from __future__ import annotations

import importlib
import os
import threading
from types import ModuleType

_lock = threading.Lock()


def import_keeping_environment(name: str) -> ModuleType:
    """Import module `name`, then put back every environment variable its import added or changed."""
    with _lock:
        before = dict(os.environ)
        module = importlib.import_module(name)
        for key in set(os.environ) - set(before):
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
    return module
