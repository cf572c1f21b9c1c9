"""What a server is started with: the pipelines it serves and the limits it enforces."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

TOKEN_ENV = "SWITCHYARD_API_TOKEN"
JOB_LEASE_S = 30.0  # with a shared state database: how long a server's claim on an upload job lasts unless renewed


@dataclass(frozen=True)
class ServiceSettings:
    configs: tuple[str, ...] = ("fixed",)  # config files or shipped config names; the first is the default
    overrides: tuple[str, ...] = ()  # --set KEY=VALUE for every config
    max_question_chars: int = 2000
    max_in_flight: int = 4  # runs at once; beyond it 429 with Retry-After, never a queue
    request_timeout_s: float = 120.0
    max_upload_files: int = 20
    max_upload_bytes: int = 20 * 2**20  # per file
    upload_dir: Path = Path(".switchyard/uploads")
    warm_up: bool = True
    audit_log: Path | None = None  # one JSON line per request; None: the switchyard.audit logger
    audit_questions: bool = False  # put the question in the audit line
    api_token: str | None = field(default_factory=lambda: os.environ.get(TOKEN_ENV) or None, repr=False)
    # With API keys in the index's key file, the shared token is refused unless the operator opts in here
    # (`serve --allow-token-with-keys`): a token that opens everything would silently widen scoped keys.
    token_with_keys: bool = False
    # PostgreSQL shared by several servers (service/state.py); None: files beside the index (one server)
    state_url: str | None = field(default=None, repr=False)
    job_lease_s: float = JOB_LEASE_S  # with state_url

    def __post_init__(self):
        if not self.configs:
            raise ValueError("at least one pipeline config is needed")
        if (
            min(self.max_question_chars, self.max_in_flight, self.max_upload_files, self.max_upload_bytes) < 1
            or self.request_timeout_s <= 0
            or self.job_lease_s <= 0
        ):
            raise ValueError("limits must be positive")


def beside_index(store_uri: str, upload_dir: Path, name: str) -> Path:
    """Where the service keeps a file of its own (job store, keys): in the index folder when the index is local,
    else (object storage: s3://, gs://, ...) in the upload folder, since these need a local file."""
    if store_uri.startswith("file://"):
        store_uri = store_uri[len("file://") :]
    folder = Path(upload_dir) if "://" in store_uri else Path(store_uri)
    return folder / name
