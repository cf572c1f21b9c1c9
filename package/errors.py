"""One error family. Every error Switchyard raises on purpose is a `SwitchyardError`: its message is one clear line
for the user, and its class says how each edge reports it — `exit_code` for the CLI, `http_status` for the HTTP
service. Edges map errors by type only (never by message text); anything else is unexpected: one line to the user,
the full traceback to the log.

Each class keeps the builtin base it always had (`ValueError` for bad input, `RuntimeError` for failures), so code
catching those keeps working. Modules raise the subclass that fits; add a new one here when no class fits.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_FAIL, EXIT_USAGE = 1, 2


def program() -> str:
    """The command a hint names: `cli.py` when this process is the repository's cli.py, else `switchyard` (the
    installed command; also what a host embedding the library should be told to run)."""
    return "cli.py" if Path(sys.argv[0] if sys.argv else "").name == "cli.py" else "switchyard"


class SwitchyardError(Exception):
    exit_code: int = EXIT_FAIL
    http_status: int = 500


class UsageError(SwitchyardError, ValueError):
    """The caller's input is wrong (a setting, a filter, an argument): fix the call and try again."""

    exit_code = EXIT_USAGE
    http_status = 400


class ConfigError(UsageError):
    """A config file or `--set` override that does not validate."""


class FilterError(UsageError):
    """A `where` filter that does not parse."""


class AccessError(UsageError):
    """An access label, API key name or key setting that does not validate, or a key that exists / does not."""


class QuestionError(SwitchyardError, ValueError):
    """An empty question, or a question for a collection that cannot answer (empty)."""

    http_status = 400


class HistoryError(QuestionError):
    """Earlier turns of a conversation that do not parse: not a list of messages, an unknown role, a message with no
    text."""


class InputError(SwitchyardError, ValueError):
    """A file or answer handed to a command that it cannot use: a saved run that is missing or is not one
    (`switchyard trace`), a paused run's answer that never came (standard input ended)."""

    http_status = 400


class DatasetError(SwitchyardError, ValueError):
    """A dataset folder or file (BEIR, QA) that is missing or malformed."""


class PdfError(SwitchyardError, ValueError):
    """A PDF that cannot be read (malformed, encrypted, no extractable text); ingestion reports it per file."""


class AdapterError(SwitchyardError, ValueError):
    """A query adapter file that is missing, malformed or fitted for another model."""


class StoreError(SwitchyardError, RuntimeError):
    """The index cannot do what was asked (cannot be opened, a write conflicts with its recorded settings)."""

    http_status = 409


class CollectionNotFound(StoreError):
    http_status = 404


class CollectionTooLargeError(StoreError):
    """A collection past the in-memory BM25 backend's size limit."""


class EmbedderError(SwitchyardError, RuntimeError):
    """The embedding model cannot be loaded or run."""


class VectorCacheMiss(EmbedderError):
    """A replay asked for a vector its recording does not hold (retrievers/vector_recording.py)."""


class ModelNotFoundError(SwitchyardError, RuntimeError):
    """A configured model that is not on disk (nothing is ever downloaded)."""


class RerankerError(SwitchyardError, RuntimeError):
    pass


class LLMError(SwitchyardError, RuntimeError):
    """The LLM could not be used at all (unreachable server, missing model file, bad credentials)."""

    http_status = 502


class LLMCacheMiss(LLMError):
    """A replay asked for a reply that was never recorded."""


class ContextOverflowError(LLMError):
    """A server refused the prompt as longer than its context, and reported its counts (llm/backend.py reads them
    from the `openai` client's error; the OpenAI backend then shortens the prompt and asks again)."""

    def __init__(self, message: str, context_tokens: int, prompt_tokens: int):
        super().__init__(message)
        self.context_tokens, self.prompt_tokens = context_tokens, prompt_tokens


class TransientLLMError(SwitchyardError, RuntimeError):
    """Worth retrying: a timeout, a dropped connection, a 429 or a 5xx, a malformed reply (the LLM client retries it
    and reports an `LLMError` when the retries run out)."""

    http_status = 502


class RunCancelled(SwitchyardError, RuntimeError):
    """The run was cancelled (its client went away or its deadline passed); no further LLM call is made for it."""


class ApprovalError(UsageError):
    """A human's answer to a paused run that cannot apply: edited arguments the action does not take or that break
    the decision's limits. The run stays paused."""

    http_status = 422


class UnknownThread(SwitchyardError, KeyError):
    """A paused run (thread) that does not exist, or no longer waits for an answer."""

    http_status = 404

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else type(self).__name__


class NotFound(SwitchyardError, LookupError):
    """An item asked for by its id (a document, an upload job) that does not exist or that the caller may not see
    (the same words for both)."""

    http_status = 404


class UnknownConversation(UnknownThread):
    """A conversation thread that does not exist, was deleted, or belongs to another caller (the same words)."""


class ConversationExpired(SwitchyardError, RuntimeError):
    """A conversation thread unused for longer than conversation.expire_s: it was forgotten and cannot go on."""

    http_status = 410


class PauseExpired(SwitchyardError, RuntimeError):
    """A paused run was not answered within graph.router.approve_timeout_s: it cannot be resumed."""

    http_status = 410


class ManifestMismatch(SwitchyardError, RuntimeError):
    """An evaluation folder's recorded setup differs from the one asked to resume it."""


class MissingExtra(SwitchyardError, RuntimeError):
    """A capability whose optional dependencies are not installed; the message names the extra that brings them
    (switchyard.extras). A usage error: the installation, not the run, has to change."""

    exit_code = EXIT_USAGE
    http_status = 501


class UnknownPipeline(SwitchyardError, KeyError):
    """A pipeline name the service was not started with."""

    http_status = 404

    def __init__(self, name: str, known: list[str]):
        super().__init__(f"unknown pipeline {name!r}; known pipelines: {', '.join(known)}")
        self.message = str(self.args[0])

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class ServiceError(SwitchyardError):
    """An HTTP request the service refuses, with its status (and headers, e.g. Retry-After) given per instance."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.http_status = self.status = status
        self.message, self.headers = message, headers or {}


class StateUnavailable(ServiceError):
    """The server's shared state (its PostgreSQL database) cannot be reached now: 503, try again shortly."""

    http_status = 503
    RETRY_AFTER_S = 5

    def __init__(self, message: str):
        super().__init__(503, message, {"Retry-After": str(self.RETRY_AFTER_S)})


def first_line(exc: BaseException) -> str:
    """The message's first line, or the class name for an exception without one."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
