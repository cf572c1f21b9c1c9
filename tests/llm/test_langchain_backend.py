"""`llm.backend: langchain`: a LangChain chat model behind the backend contract. A small chat model class defined
here checks the plumbing (per-call settings, streaming, cancellation, errors, the reply cache); the real
`langchain_openai.ChatOpenAI` against the local llama.cpp server checks structured output and streaming end to end."""

import json
import threading
from typing import Any

import httpx
import openai
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import BaseModel

from switchyard.configs.loader import load_config
from switchyard.errors import ConfigError, LLMCacheMiss, LLMError, RunCancelled
from switchyard.llm.client import LLM
from switchyard.llm.factory import build_llm, llm_identity
from switchyard.llm.langchain_backend import LangChainBackend, chat_model_identity
from switchyard.run_context import RunContext

ASK = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Who built the engine?"}]
ECHO_PATH = "tests.llm.test_langchain_backend:EchoChatModel"


class EchoChatModel(BaseChatModel):
    """Replies with the settings it was called with, word by word when streamed; `fail` raises instead."""

    temperature: float = 0.7
    max_tokens: int | None = None
    seed: int | None = None
    fail: str = ""
    barrier: Any = None

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _text(self, messages) -> str:
        if self.fail == "connection":
            raise openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat"))
        if self.fail:
            raise ValueError(self.fail)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        return f"t={self.temperature} n={self.max_tokens} seed={self.seed} last={messages[-1].content}"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        text = self._text(messages)
        usage = {"input_tokens": 11, "output_tokens": len(text.split()), "total_tokens": 11 + len(text.split())}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        for word in self._text(messages).split(" "):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word + " "))


def backend(**fields) -> LangChainBackend:
    return LangChainBackend(EchoChatModel(**fields))


class TestPlumbing:
    def test_settings_of_the_call_reach_the_model_and_usage_is_counted(self):
        model = EchoChatModel()
        with (run := RunContext(seed=42)).metered() as usage:
            text = LLM(LangChainBackend(model), temperature=0.2, max_tokens=17).generate(ASK, run=run)
        assert text == "t=0.2 n=17 seed=42 last=Who built the engine?"
        assert (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens) == (1, 11, len(text.split()))
        assert (model.temperature, model.max_tokens, model.seed) == (0.7, None, None)  # the shared model untouched

    def test_concurrent_calls_keep_their_own_settings(self):
        shared = LangChainBackend(EchoChatModel(barrier=threading.Barrier(2)))
        replies: dict[int, str] = {}

        def call(seed: int) -> None:
            replies[seed] = shared.chat(ASK, max_tokens=seed, temperature=0.0, seed=seed).text

        threads = [threading.Thread(target=call, args=(s,)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert replies == {s: f"t=0.0 n={s} seed={s} last=Who built the engine?" for s in (1, 2)}

    def test_streaming_sends_every_piece_and_counts_chunks_without_usage(self):
        tokens: list[str] = []
        reply = backend().chat(ASK, max_tokens=8, temperature=0.0, on_token=tokens.append)
        assert "".join(tokens) == reply.text and len(tokens) == len(reply.text.split()) > 3
        assert reply.completion_tokens == len(tokens)

    def test_cancellation_stops_the_stream(self):
        cancelled = threading.Event()
        tokens: list[str] = []

        def sink(piece: str) -> None:
            tokens.append(piece)
            cancelled.set()

        with pytest.raises(RunCancelled):
            backend().chat(ASK, max_tokens=8, temperature=0.0, on_token=sink, cancelled=cancelled)
        assert len(tokens) == 1

    def test_a_dropped_connection_is_retried_then_one_clear_error(self):
        llm = LLM(backend(fail="connection"), max_retries=1, backoff_s=0.0)
        with pytest.raises(LLMError, match=r"failed after 2 tries \(unreachable: APIConnectionError\)"):
            llm.generate(ASK)

    def test_any_other_model_error_is_an_llm_error_naming_the_model(self):
        with pytest.raises(LLMError, match="EchoChatModel failed: ValueError: quota"):
            backend(fail="quota").chat(ASK, max_tokens=8, temperature=0.0)


class TestConfig:
    def test_built_from_import_path_and_kwargs(self):
        cfg = load_config(
            None, ["llm.backend=langchain", f"llm.chat_model={ECHO_PATH}", "llm.chat_model_kwargs.temperature=0.3"]
        )
        llm = build_llm(cfg.llm)
        assert isinstance(llm.backend, LangChainBackend) and llm.backend.model.temperature == 0.3
        assert llm.generate(ASK).startswith("t=0.0 n=256 ")  # llm.temperature and llm.max_tokens win per call

    @pytest.mark.parametrize(
        "path, message",
        [
            ("EchoChatModel", "is not an import path"),
            ("no_such_module.Chat", "cannot import no_such_module"),
            ("tests.llm.test_langchain_backend.NoSuchClass", "has no NoSuchClass"),
        ],
    )
    def test_a_bad_import_path_is_a_clear_error(self, path, message):
        cfg = load_config(None, ["llm.backend=langchain", f"llm.chat_model={path}"])
        with pytest.raises(LLMError, match=message):
            build_llm(cfg.llm)

    def test_bad_kwargs_and_non_chat_models_are_clear_errors(self):
        cfg = load_config(
            None, ["llm.backend=langchain", f"llm.chat_model={ECHO_PATH}", "llm.chat_model_kwargs.temperature=hot"]
        )
        with pytest.raises(LLMError, match=r"cannot build .*EchoChatModel\(temperature\): ValidationError"):
            build_llm(cfg.llm)
        with pytest.raises(LLMError, match="needs a LangChain chat model, not dict"):
            LangChainBackend({"model": "x"})

    def test_built_from_a_provider_model_string_by_init_chat_model(self):
        cfg = load_config(
            None,
            [
                "llm.backend=langchain",
                "llm.chat_model=openai:smollm2",
                "llm.chat_model_kwargs.base_url=http://127.0.0.1:1/v1",
                "llm.chat_model_kwargs.api_key=not-needed",
            ],
        )
        backend = build_llm(cfg.llm).backend
        assert type(backend.model).__name__ == "ChatOpenAI" and backend.model.model_name == "smollm2"
        assert backend.base_url == "http://127.0.0.1:1/v1"
        assert llm_identity(cfg.llm) == {
            "backend": "langchain",
            "model": "smollm2",
            "chat_model": "openai:smollm2",
            "settings": {},
        }

    def test_an_unknown_provider_is_a_clear_error(self):
        cfg = load_config(None, ["llm.backend=langchain", "llm.chat_model=nosuchprovider:some-model"])
        with pytest.raises(LLMError, match=r"cannot build nosuchprovider:some-model\(\): ValueError"):
            build_llm(cfg.llm)

    def test_langchain_needs_a_chat_model(self):
        with pytest.raises(ConfigError, match="needs llm.chat_model"):
            load_config(None, ["llm.backend=langchain"])

    def test_identity_names_the_model_without_secrets_or_addresses(self):
        ident = chat_model_identity(
            "langchain_openai.ChatOpenAI",
            {
                "model": "smollm2",
                "base_url": "http://127.0.0.1:1/v1",
                "api_key": "sk-secret",
                "timeout": 9,
                "top_p": 0.5,
            },
        )
        assert ident == {
            "backend": "langchain",
            "model": "smollm2",
            "chat_model": "langchain_openai.ChatOpenAI",
            "settings": {"top_p": 0.5},
        }

    def test_recorded_replies_replay_without_the_model(self, tmp_path):
        sets = ["llm.backend=langchain", f"llm.chat_model={ECHO_PATH}", f"llm.cache_dir={tmp_path}"]
        recorded = build_llm(load_config(None, sets).llm).generate(ASK)
        replay = build_llm(load_config(None, [*sets, "llm.replay=true"]).llm)
        assert replay.generate(ASK) == recorded
        other = load_config(None, [*sets, "llm.replay=true", "llm.chat_model_kwargs.temperature=0.1"]).llm
        assert llm_identity(other) != llm_identity(load_config(None, sets).llm)
        with pytest.raises(LLMCacheMiss):
            build_llm(other).generate(ASK)


class Capital(BaseModel):
    city: str
    sure: bool


@pytest.fixture(scope="module")
def server_llm(llama_server):
    """langchain_openai.ChatOpenAI talking to llama_cpp.server (the packaged GGUF). `extra_body.max_tokens` caps
    generation: ChatOpenAI sends `max_completion_tokens`, which llama_cpp.server ignores."""
    cfg = load_config(
        None,
        [
            "llm.backend=langchain",
            "llm.chat_model=langchain_openai.ChatOpenAI",
            "llm.chat_model_kwargs.model=smollm2",
            f"llm.chat_model_kwargs.base_url={llama_server}",
            "llm.chat_model_kwargs.api_key=not-needed",
            "llm.chat_model_kwargs.timeout=300",
            "llm.chat_model_kwargs.extra_body.max_tokens=24",
            "llm.max_tokens=24",
        ],
    )
    return build_llm(cfg.llm)


@pytest.mark.slow
class TestAgainstLocalServer:
    def test_structured_output_through_a_forced_tool_call(self, server_llm):
        ask = [{"role": "user", "content": "What is the capital of France?"}]
        with (run := RunContext()).metered() as usage:
            result = server_llm.structured(ask, Capital, fallback=Capital(city="", sure=False), max_tokens=40, run=run)
        assert result.status == "ok" and isinstance(result.value, Capital)  # grammar-constrained: always parses
        assert usage.llm_calls == 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0

    def test_streamed_and_plain_replies(self, server_llm):
        tokens: list[str] = []
        with (run := RunContext()).metered() as usage:
            streamed = server_llm.generate(ASK, on_token=tokens.append, run=run)
            plain = server_llm.generate(ASK, run=run)
        assert streamed and "".join(tokens).strip() == streamed and len(tokens) > 1
        assert plain and usage.llm_calls == 2 and usage.completion_tokens > 0

    def test_a_forced_tool_call_through_bind_tools(self, server_llm):
        from switchyard.nodes.router import ROUTER_TOOLS

        ask = [{"role": "user", "content": "Search the documents for the knuckle coupler."}]
        forced = {"type": "function", "function": {"name": "retrieve"}}
        reply = server_llm.call_tools(ask, ROUTER_TOOLS, tool_choice=forced, max_tokens=40)
        assert [c["name"] for c in reply.tool_calls] == ["retrieve"]  # grammar-constrained to the tool's schema
        assert isinstance(json.loads(reply.tool_calls[0]["arguments"]), dict)
