"""Prompts fitted to a server's context window (llm/fitting.py): the window configured or asked from the server,
fitted before sending (lowest-ranked passages first, the question kept), the rate learned from usage, an
overflowing tool call asked again as JSON, the LangChain backend alike. Real HTTP servers on 127.0.0.1."""

import json

import pytest

from switchyard.llm.fitting import DEFAULT_CHARS_A_TOKEN, server_context_window
from switchyard.llm.openai_backend import OpenAIBackend
from tests.canned_server import ContextLimitedServer
from tests.together import run_together

QUESTION = "Question: How long is the bridge over the river?"
PASSAGES = [
    f"[{i}] Bridge {i}: " + f"the span number {i} of the bridge is {i * 7} metres long. " * 8 for i in range(1, 13)
]
ANSWER_PROMPT = [
    {"role": "system", "content": "Answer the question using only the numbered passages."},
    {"role": "user", "content": "Passages:\n" + "\n".join(PASSAGES) + "\n\n" + QUESTION},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} the documents",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
    for name in ("retrieve", "rewrite")
]


def server_count(messages: list[dict]) -> int:
    return sum(len(m["content"]) // 4 + 10 for m in messages)  # as ContextLimitedServer counts


class TestTheServerSaysItsWindow:
    @pytest.mark.parametrize("says", ["vllm", "llama-server"])
    def test_the_window_a_server_reports_is_read(self, says):
        with ContextLimitedServer(1536, "llama-server", says=says) as server:
            assert server_context_window(server.url, "m", None, 5.0) == 1536

    def test_a_server_that_does_not_say_and_one_that_is_not_there_give_none(self):
        with ContextLimitedServer(1536, "llama-cpp-python") as server:
            assert server_context_window(server.url, "m", None, 5.0) is None
            assert server.asked == ["/v1/models", "/props"]
        assert server_context_window(server.url, "m", None, 1.0) is None  # closed: nothing listens


class TestFittedBeforeSending:
    @pytest.mark.parametrize("how", ["configured", "vllm", "llama-server"])
    def test_a_known_window_fits_the_prompt_dropping_the_lowest_ranked_passages(self, how):
        says = None if how == "configured" else how
        with ContextLimitedServer(1024, "llama-cpp-python", says=says) as server:
            backend = OpenAIBackend(server.url, "m", context_window=1024 if how == "configured" else None)
            reply = backend.chat(ANSWER_PROMPT, max_tokens=100, temperature=0.0)
        assert server_count(ANSWER_PROMPT) + 100 > 1024  # it would not have fitted
        assert len(server.requests) == 1 and reply.text.startswith("read ")  # fitted before it was sent
        sent = server.requests[0][1]["content"]
        assert server_count(server.requests[0]) + 100 <= 1024
        assert sent.endswith("\n\n" + QUESTION)  # the question is kept
        kept = [p for p in PASSAGES if p in sent]
        assert 1 <= len(kept) < len(PASSAGES) and kept == PASSAGES[: len(kept)]  # the highest-ranked, whole
        assert ANSWER_PROMPT[1]["content"].endswith(QUESTION) and PASSAGES[-1] in ANSWER_PROMPT[1]["content"]

    def test_the_rate_is_learned_from_the_servers_counts(self):
        short = [{"role": "user", "content": "How long is the bridge? " * 20}]
        with ContextLimitedServer(4096, "llama-cpp-python") as server:
            backend = OpenAIBackend(server.url, "m", context_window=4096)
            assert backend.fitter.chars_a_token == DEFAULT_CHARS_A_TOKEN
            backend.chat(short, max_tokens=10, temperature=0.0)
        assert backend.fitter.chars_a_token == pytest.approx(4.0, rel=0.05)  # the server's 4 characters a token

    def test_without_a_window_a_refusal_still_shortens_and_keeps_the_question(self):
        with ContextLimitedServer(1024, "llama-server") as server:
            reply = OpenAIBackend(server.url, "m").chat(ANSWER_PROMPT, max_tokens=100, temperature=0.0)
        assert reply.text.startswith("read ") and len(server.requests) == 2
        assert server.requests[1][1]["content"].endswith(QUESTION) and PASSAGES[0] in server.requests[1][1]["content"]

    def test_threads_on_a_barrier_ask_the_server_once(self):
        with ContextLimitedServer(1024, "llama-server", says="llama-server") as server:
            backend = OpenAIBackend(server.url, "m")
            replies = run_together(8, lambda i: backend.chat(ANSWER_PROMPT, max_tokens=100, temperature=0.0))
        assert all(r.text.startswith("read ") for r in replies) and len(server.requests) == 8
        assert server.asked == ["/v1/models", "/props"]  # asked once, by one of the eight


class TestToolCallOverflow:
    def test_a_tool_call_that_overflows_the_server_is_asked_again_as_json(self):
        call = {"name": "retrieve", "arguments": {"query": "bridge length"}}
        with ContextLimitedServer(
            1024, "llama-cpp-python", generates_into_context=True, json_reply=json.dumps(call)
        ) as server:
            reply = OpenAIBackend(server.url, "m").chat(
                [{"role": "system", "content": "Pick the next action."}, {"role": "user", "content": QUESTION}],
                max_tokens=64,
                temperature=0.0,
                tools=TOOLS,
                tool_choice="auto",
            )
        assert reply.tool_calls == [{"name": "retrieve", "arguments": json.dumps({"query": "bridge length"})}]
        assert [("tools" in b) for b in server.bodies] == [True, False]  # counted far past the prompt: asked as JSON
        asked = server.bodies[-1]
        assert asked["max_tokens"] == 64 and "retrieve: retrieve the documents" in asked["messages"][0]["content"]
        schema = json.dumps(asked["response_format"])
        assert '"const": "retrieve"' in schema and '"const": "rewrite"' in schema

    def test_json_that_names_no_tool_is_text_for_the_callers_repair(self):
        with ContextLimitedServer(
            1024, "llama-cpp-python", generates_into_context=True, json_reply='{"x": 1'
        ) as server:
            reply = OpenAIBackend(server.url, "m").chat(
                [{"role": "user", "content": QUESTION}], max_tokens=64, temperature=0.0, tools=TOOLS
            )
        assert reply.tool_calls == [] and reply.text == '{"x": 1'
        assert server.bodies[-1]["messages"][0]["role"] == "system"  # the tools listed in a system message of its own


class TestLangChainBackend:
    @staticmethod
    def backend(server, **kwargs):
        from langchain_openai import ChatOpenAI

        from switchyard.llm.langchain_backend import LangChainBackend

        return LangChainBackend(ChatOpenAI(model="m", base_url=server.url, api_key="none", max_retries=0), **kwargs)

    @pytest.mark.parametrize("how", ["configured", "llama-server"])
    def test_a_known_window_fits_the_prompt_before_it_is_sent(self, how):
        says = None if how == "configured" else how
        with ContextLimitedServer(1024, "llama-cpp-python", says=says) as server:
            backend = self.backend(server, context_window=1024 if how == "configured" else None)
            reply = backend.chat(ANSWER_PROMPT, max_tokens=100, temperature=0.0)
        assert reply.text.startswith("read ") and len(server.requests) == 1
        assert server_count(server.requests[0]) + 100 <= 1024 and server.requests[0][1]["content"].endswith(QUESTION)

    def test_a_refusal_is_shortened_and_sent_again(self):
        with ContextLimitedServer(1024, "llama-cpp-python") as server:
            reply = self.backend(server).chat(ANSWER_PROMPT, max_tokens=100, temperature=0.0)
        assert reply.text.startswith("read ") and len(server.requests) == 2
        assert server.requests[1][1]["content"].endswith(QUESTION)

    def test_the_models_profile_gives_the_window(self):
        from langchain_openai import ChatOpenAI

        from switchyard.llm.langchain_backend import LangChainBackend

        model = ChatOpenAI(model="gpt-4o-mini", api_key="none")
        assert LangChainBackend(model).fitter.context_window == model.profile["max_input_tokens"]
