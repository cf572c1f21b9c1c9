import pytest
from pydantic import BaseModel

from switchyard.errors import LLMError, TransientLLMError
from switchyard.llm.client import LLM, _parse
from switchyard.run_context import RunContext
from tests.canned_server import CannedServer, ContextLimitedServer
from tests.scripted_backend import ScriptedBackend
from tests.together import run_together


class Pick(BaseModel):
    choice: str


class TestLLM:
    def test_structured_ok_and_accounting(self):
        llm = LLM(ScriptedBackend(['{"choice": "a"}']))
        with (run := RunContext()).metered() as usage:
            result = llm.structured([{"role": "user", "content": "pick one"}], Pick, fallback=Pick(choice="z"), run=run)
        assert result.status == "ok" and result.value.choice == "a"
        assert usage.llm_calls == 1 and usage.prompt_tokens == 2 and usage.completion_tokens == 2

    def test_one_repair_retry_then_ok(self):
        backend = ScriptedBackend(["not json at all", '```json\n{"choice": "b"}\n```'])
        llm = LLM(backend)
        with (run := RunContext()).metered() as usage:
            result = llm.structured([{"role": "user", "content": "pick"}], Pick, fallback=Pick(choice="z"), run=run)
        assert result.status == "repaired" and result.value.choice == "b"
        assert "not valid" in backend.calls[1][-1]["content"]  # the repair prompt says what was wrong
        assert usage.repairs == 1 and usage.parse_fallbacks == 0 and "repairs" not in usage.as_dict()

    def test_fallback_after_failed_repair(self):
        llm = LLM(ScriptedBackend(['{"wrong": 1}', "{broken"]))
        with (run := RunContext()).metered() as usage:
            result = llm.structured([{"role": "user", "content": "pick"}], Pick, fallback=Pick(choice="z"), run=run)
        assert result.status == "fallback" and result.value.choice == "z"
        assert usage.parse_fallbacks == 1 and usage.llm_calls == 2 and usage.repairs == 0

    def test_transient_errors_are_retried_with_backoff(self):
        llm = LLM(
            ScriptedBackend([TransientLLMError("503"), TransientLLMError("timeout"), "fine"]),
            max_retries=2,
            backoff_s=0.0,
        )
        with (run := RunContext()).metered() as usage:
            assert llm.generate([{"role": "user", "content": "x"}], run=run) == "fine"
        assert usage.llm_calls == 1

    def test_unreachable_after_retries_is_one_clear_error(self):
        llm = LLM(ScriptedBackend([TransientLLMError("connection refused")]), max_retries=1, backoff_s=0.0)
        with pytest.raises(LLMError, match="failed after 2 tries"):
            llm.generate([{"role": "user", "content": "x"}])

    @pytest.mark.parametrize(
        "raw, ok",
        [
            ('{"choice": "x"} trailing', True),
            ('prefix {"choice": "y"}', True),
            ("[]", False),
            ('{"choice": 3}', False),
            ("", False),
        ],
    )
    def test_parse(self, raw, ok):
        value, error = _parse(raw, Pick)
        assert (value is not None) == ok and (error == "") == ok


@pytest.mark.slow
class TestLocalBackend:
    def test_schema_constrained_json_from_the_real_model(self, local_llm):
        with (run := RunContext()).metered() as usage:
            result = local_llm.structured(
                [{"role": "user", "content": 'Is Paris in France? Reply as JSON {"choice": "yes" or "no"}.'}],
                Pick,
                fallback=Pick(choice="fallback"),
                max_tokens=24,
                run=run,
            )
        assert result.status in ("ok", "repaired") and result.value.choice
        assert usage.prompt_tokens > 0 and usage.completion_tokens > 0

    def test_missing_gguf_is_clear_error(self, tmp_path):
        from switchyard.llm.llamacpp import LlamaCppBackend

        with pytest.raises(LLMError, match="GGUF model file not found"):
            LlamaCppBackend(str(tmp_path / "none.gguf"))


class TestOpenAIBackendTimeout:
    def test_a_server_that_never_answers_times_out_with_a_clear_error(self):
        """A real socket on 127.0.0.1 that accepts the request and never replies."""
        import socket
        import threading

        from switchyard.llm.openai_backend import OpenAIBackend

        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        held = []
        threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
        try:
            backend = OpenAIBackend(f"http://127.0.0.1:{server.getsockname()[1]}/v1", "m", timeout_s=0.3)
            llm = LLM(backend, max_retries=0)
            with pytest.raises(LLMError, match=r"failed after 1 tries \(timed out after 0.3s\)"):
                llm.generate([{"role": "user", "content": "x"}])
        finally:
            server.close()


class TestMisbehavingServer:
    @pytest.mark.parametrize(
        "body, content_type, said",
        [
            (b"<html>gateway says hi</html>", "text/html", "HTTP 200 with a body that is not JSON"),
            (b"<html>gateway says hi</html>", "application/json", "HTTP 200 with a body that is not JSON"),
            (
                b'{"id": "x", "object": "chat.completion", "model": "m"}',
                "application/json",
                "the reply has no 'choices'",
            ),
            (
                b'{"id": "x", "object": "chat.completion", "model": "m", "choices": []}',
                "application/json",
                "the reply has no 'choices'",
            ),
        ],
    )
    def test_is_one_clear_line_after_retries(self, body, content_type, said):
        from switchyard.llm.openai_backend import OpenAIBackend

        server = CannedServer(body, content_type)
        try:
            llm = LLM(OpenAIBackend(server.url, "m"), max_retries=1, backoff_s=0.0)
            prefix = f"LLM backend {server.url} failed after 2 tries (misbehaving server at {server.url}: "
            for call in (
                lambda: llm.generate([{"role": "user", "content": "x"}]),
                lambda: llm.structured([{"role": "user", "content": "x"}], Pick, Pick(choice="z")),
            ):
                with pytest.raises(LLMError) as info:
                    call()
                assert str(info.value) == f"{prefix}{said})"
            with pytest.raises(LLMError) as info:  # the same server asked for a token stream
                llm.generate([{"role": "user", "content": "x"}], on_token=lambda t: None)
            assert str(info.value) == f"{prefix}HTTP 200 without a chat-completion stream)"
        finally:
            server.close()


class TestScriptedStreaming:
    def test_tokens_reach_the_sink_and_the_text_is_whole(self):
        pieces = []
        llm = LLM(ScriptedBackend(["Eli Janney patented it [1]."]))
        assert llm.generate([{"role": "user", "content": "x"}], on_token=pieces.append) == "Eli Janney patented it [1]."
        assert "".join(pieces) == "Eli Janney patented it [1]." and len(pieces) == 5

    def test_a_cancelled_run_makes_no_call(self):
        import threading

        from switchyard.errors import RunCancelled
        from switchyard.run_context import RunContext

        backend = ScriptedBackend(["never"])
        context = RunContext(cancelled=threading.Event())
        context.cancelled.set()
        with pytest.raises(RunCancelled):
            LLM(backend).generate([{"role": "user", "content": "x"}], run=context)
        assert backend.calls == []


@pytest.mark.slow
class TestLocalBackendConcurrency:
    MESSAGES = [{"role": "user", "content": "Name three colours of a railway signal."}]

    def test_instances_serve_barrier_started_threads(self):
        from switchyard.llm.llamacpp import LlamaCppBackend

        backend = LlamaCppBackend(instances=2)
        llm = LLM(backend, max_tokens=16)
        alone = llm.generate(self.MESSAGES)

        def ask(_):
            with (run := RunContext()).metered() as usage:
                return llm.generate(self.MESSAGES, run=run), usage.llm_calls

        assert run_together(4, ask, timeout=300) == [(alone, 1)] * 4
        assert backend._loaded == 2  # never more instances than configured

    def test_streamed_tokens_and_usage_equal_the_plain_call(self, local_llm):
        pieces = []
        with (run := RunContext()).metered() as plain:
            text = local_llm.generate(self.MESSAGES, max_tokens=24, run=run)
        with (run := RunContext()).metered() as streamed:
            assert local_llm.generate(self.MESSAGES, max_tokens=24, on_token=pieces.append, run=run) == text
        assert "".join(pieces).strip() == text and len(pieces) > 1
        assert (streamed.prompt_tokens, streamed.completion_tokens) == (plain.prompt_tokens, plain.completion_tokens)

    def test_cancelling_mid_generation_stops_it(self, local_llm):
        import threading

        from switchyard.errors import RunCancelled
        from switchyard.run_context import RunContext

        context = RunContext(cancelled=threading.Event())
        pieces = []

        def sink(text):
            pieces.append(text)
            context.cancelled.set()  # the client goes away after the first token

        with context.metered() as usage, pytest.raises(RunCancelled):
            local_llm.generate(
                [{"role": "user", "content": "Write a long story about trains."}],
                max_tokens=120,
                on_token=sink,
                run=context,
            )
        assert usage.completion_tokens <= 3 and len(pieces) <= 2


class TestOpenAIBackendContextOverflow:
    LONG = "".join(f"fact {i} says the bridge is {i * 7} metres long. " for i in range(400))  # ~4,000 tokens

    @pytest.mark.parametrize("refusal", sorted(ContextLimitedServer.REFUSALS))
    @pytest.mark.parametrize("streamed", [False, True])
    def test_a_refused_prompt_is_shortened_and_sent_again(self, refusal, streamed):
        from switchyard.llm.fitting import FIT_ATTEMPTS
        from switchyard.llm.openai_backend import OpenAIBackend

        server = ContextLimitedServer(1024, refusal)
        messages = [
            {"role": "system", "content": "Answer from the passages."},
            {"role": "user", "content": self.LONG},
            {"role": "assistant", "content": "Noted."},
        ]
        try:
            reply = OpenAIBackend(server.url, "m").chat(
                messages, max_tokens=100, temperature=0.0, on_token=(lambda t: None) if streamed else None
            )
        finally:
            server.close()
        assert reply.text.startswith("read ") and int(reply.text.split()[1]) + 100 <= 1024
        assert 2 <= len(server.requests) <= FIT_ATTEMPTS
        sent = server.requests[-1]
        assert sent[0] == messages[0] and sent[2] == messages[2]  # only the longest message is shortened
        assert self.LONG.startswith(sent[1]["content"]) and len(sent[1]["content"]) < len(self.LONG)
        assert messages[1]["content"] == self.LONG  # the caller's messages are not modified

    def test_a_prompt_that_cannot_be_shortened_is_one_clear_error(self):
        from switchyard.llm.openai_backend import OpenAIBackend

        server = ContextLimitedServer(64, "llama-cpp-python")
        try:
            with pytest.raises(LLMError) as info:
                OpenAIBackend(server.url, "m").chat(
                    [{"role": "user", "content": "What is the bridge's length?"}], max_tokens=100, temperature=0.0
                )
        finally:
            server.close()
        assert len(server.requests) == 1  # nothing to shorten: not sent again
        assert str(info.value).startswith(
            f"the prompt does not fit the context of the LLM server at {server.url} "
            "(64 tokens) with 100 tokens left for the reply: LLM server at "
        )

    def test_an_overflow_of_the_servers_own_generation_is_one_clear_error(self):
        from switchyard.llm.openai_backend import OpenAIBackend

        server = ContextLimitedServer(1024, "llama-cpp-python", generates_into_context=True)
        try:
            with pytest.raises(LLMError) as info:
                OpenAIBackend(server.url, "m").chat(
                    [{"role": "user", "content": self.LONG}], max_tokens=96, temperature=0.0
                )
        finally:
            server.close()
        assert len(server.requests) == 2  # shortened once; the count did not fall, so not sent a third time
        assert str(info.value).startswith(
            f"the LLM server at {server.url} overflows its context (1024 tokens) with "
            "the prompt shortened too (1025, then 1025 tokens counted): the overflow is "
            "in what it generates, not in the prompt: LLM server at "
        )

    def test_other_refusals_are_not_retried(self):
        from switchyard.llm.openai_backend import OpenAIBackend

        server = CannedServer(b"", status=400)
        try:
            with pytest.raises(LLMError, match=r"refused the request \(HTTP 400\)"):
                OpenAIBackend(server.url, "m").chat(
                    [{"role": "user", "content": "x" * 5000}], max_tokens=8, temperature=0.0
                )
            assert len(server.bodies) == 1
        finally:
            server.close()
