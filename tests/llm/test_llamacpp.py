import json
from pathlib import Path

import pytest

from switchyard.errors import LLMError
from tests.together import run_together

FIXTURES = Path(__file__).parent.parent / "fixtures" / "llm"


@pytest.fixture(scope="module")
def backend():
    from switchyard.llm.llamacpp import LlamaCppBackend

    return LlamaCppBackend(n_ctx=1024, chat_format="chatml-function-calling")


@pytest.mark.slow
class TestLocalBackendContext:
    """Prompts longer than the context, counted by the real model's tokenizer (numbers take ~1 token per 2 chars,
    so the old 3-characters-a-token estimate overflowed)."""

    DENSE = " ".join(str(i * 7919 % 100003) for i in range(3000))
    TOOLS = [
        {
            "type": "function",
            "function": {
                "name": f"search_{i}",
                "description": "Search the indexed documents for passages about a query.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
            },
        }
        for i in range(4)
    ]

    @pytest.mark.parametrize("with_tools", [False, True])
    def test_an_overlong_prompt_is_fitted_with_room_for_the_reply(self, backend, with_tools):
        extra = {"tools": self.TOOLS, "tool_choice": "auto"} if with_tools else {}
        reply = backend.chat(
            [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": self.DENSE}],
            max_tokens=32,
            temperature=0.0,
            **extra,
        )
        assert 0 < reply.prompt_tokens <= 1024 - 32

    def test_a_prompt_that_cannot_fit_is_one_clear_error(self, backend):
        messages = [{"role": "user" if i % 2 else "assistant", "content": self.DENSE[:600]} for i in range(8)]
        with pytest.raises(LLMError, match="does not fit the model's context"):
            backend.chat(messages, max_tokens=512, temperature=0.0)


@pytest.mark.slow
class TestLocalBackendToolCalls:
    """A recorded plan-react-tools request (PhantomWiki s11) on which SmolLM2 writes a search query that never
    ends: llama-cpp-python's function-calling format generated the arguments with no token limit until the 4,096-token
    context overflowed. The call is now capped at the caller's max_tokens (the cut-off arguments are malformed
    output, which the router repairs or reports)."""

    @staticmethod
    def ask(backend):
        request = json.loads((FIXTURES / "endless-tool-call-request.json").read_text())
        return backend.chat(
            request["messages"],
            max_tokens=96,
            temperature=0.0,
            tools=request["tools"],
            tool_choice=request["tool_choice"],
        )

    def test_an_endless_tool_argument_is_cut_at_max_tokens(self):
        from switchyard.llm.llamacpp import LlamaCppBackend

        reply = self.ask(LlamaCppBackend(n_ctx=4096, chat_format="chatml-function-calling"))
        assert len(reply.tool_calls) == 1 and reply.tool_calls[0]["name"] == "rewrite"
        assert 0 < reply.completion_tokens <= 96

    def test_capped_tool_calls_from_barrier_started_threads(self):
        from switchyard.llm.llamacpp import LlamaCppBackend

        backend = LlamaCppBackend(n_ctx=4096, chat_format="chatml-function-calling", instances=2)
        alone = self.ask(backend)
        assert run_together(3, lambda i: self.ask(backend), timeout=600) == [alone] * 3
        models = [backend._idle.get_nowait() for _ in range(backend._loaded)]
        assert all("create_completion" not in vars(m) for m in models)  # the cap ends with its call
