"""Opening the LanceDB database of an index: its URI and `storage_options`, with secrets read from the environment
when the store connects (never held in the config or the store), and redacted for display."""

from __future__ import annotations

import os

from switchyard.errors import StoreError

ENV_PREFIX = "env:"
_SECRET_WORDS = ("secret", "token", "password", "key", "sas", "credential")


def resolve_storage_options(options: dict[str, str]) -> dict[str, str]:
    """`storage_options` with every `env:NAME` value replaced by the environment variable NAME."""
    resolved = {}
    for key, value in options.items():
        if value.startswith(ENV_PREFIX):
            name = value[len(ENV_PREFIX) :]
            if name not in os.environ:
                raise StoreError(f"store.storage_options.{key} names ${name}, which is not set")
            value = os.environ[name]
        resolved[key] = value
    return resolved


def redact_storage_options(options: dict[str, str]) -> dict[str, str]:
    """For display: `env:NAME` references as they are, literal values of secret-looking keys as '***'."""
    return {
        k: v if v.startswith(ENV_PREFIX) or not any(w in k.lower() for w in _SECRET_WORDS) else "***"
        for k, v in options.items()
    }


def connect(uri: str, storage_options: dict[str, str]):
    """The LanceDB connection of `uri` (local folder, s3://…, gs://…), seeing writes made by other processes."""
    from datetime import timedelta

    import lancedb

    options = resolve_storage_options(storage_options) or None
    try:
        # see writes made by other processes (a CLI ingest while a server answers queries)
        return lancedb.connect(uri, read_consistency_interval=timedelta(0), storage_options=options)
    except (OSError, ValueError, RuntimeError) as exc:  # e.g. a missing bucket or an unreachable endpoint
        raise StoreError(f"cannot open the index at {uri}: {exc}") from exc
