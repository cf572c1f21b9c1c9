"""Builds the configured `LLM`: the backend for `llm.backend` (local llama.cpp, an OpenAI-compatible server, a
LangChain chat model), behind the reply cache when `llm.cache_dir` is set (which alone answers under `llm.replay`)."""

from __future__ import annotations

from pathlib import Path

from switchyard.configs.schema import LangChainLLMConfig, LLMConfig, OpenAILLMConfig
from switchyard.llm.backend import ChatBackend
from switchyard.llm.cache import CachingBackend, ReplyStore
from switchyard.llm.client import LLM
from switchyard.llm.langchain_backend import LangChainBackend, chat_model_identity
from switchyard.llm.llamacpp import PACKAGED_GGUF, LlamaCppBackend
from switchyard.llm.openai_backend import OpenAIBackend


def llm_identity(config: LLMConfig) -> dict:
    """What names the model answering for `config`, independent of where it runs: the backend, the model (a GGUF
    by file name, a server's model by its name) and the settings that change its replies beyond the request's own.
    Recorded replies are keyed by it (llm/cache.py), so a replay needs no model file."""
    # a server's context_window is not part of it: it changes only prompts that do not fit, which the server
    # refuses without it and the backend then shortens alike (llm/fitting.py)
    if isinstance(config, OpenAILLMConfig):
        return {"backend": "openai", "model": config.model}
    if isinstance(config, LangChainLLMConfig):
        assert config.chat_model is not None  # the schema requires it (LangChainLLMConfig._needs_a_chat_model)
        return chat_model_identity(config.chat_model, config.chat_model_kwargs)
    identity = {
        "backend": "local",
        "model": Path(config.model_path).name if config.model_path else PACKAGED_GGUF,
        "n_ctx": config.n_ctx,
        "repeat_penalty": config.repeat_penalty,
    }
    if config.chat_format:  # only when set, so recordings made before the option keep their keys
        identity["chat_format"] = config.chat_format
    return identity


def _backend(config: LLMConfig) -> ChatBackend:
    if isinstance(config, LangChainLLMConfig):
        assert config.chat_model is not None  # the schema requires it (LangChainLLMConfig._needs_a_chat_model)
        return LangChainBackend.from_spec(
            config.chat_model, config.chat_model_kwargs, config.structured_method, config.context_window
        )
    if isinstance(config, OpenAILLMConfig):
        return OpenAIBackend(
            config.base_url,
            config.model,
            config.api_key_env,
            config.timeout_s,
            config.response_format,
            config.seed,
            config.context_window,
        )
    return LlamaCppBackend(
        config.model_path,
        config.n_ctx,
        config.n_threads,
        config.seed,
        config.repeat_penalty,
        config.instances,
        config.chat_format,
    )


def build_llm(config: LLMConfig) -> LLM:
    """The configured backend; with `llm.cache_dir`, behind a reply cache (which alone answers with `llm.replay`:
    no model is built or loaded)."""
    backend = None if config.replay else _backend(config)
    if config.cache_dir:
        backend = CachingBackend(
            backend,
            ReplyStore(config.cache_dir),
            llm_identity(config),
            default_seed=config.seed if config.backend == "local" else None,
        )
    assert backend is not None  # llm.replay needs llm.cache_dir (the schema checks it)
    return LLM(
        backend,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        max_retries=config.max_retries,
        model=str(llm_identity(config)["model"]),
    )
