import pytest
from pydantic import BaseModel

from nodes.llm import LLM, LLMError, ScriptedBackend, TransientLLMError, _parse


class Pick(BaseModel):
    choice: str


class TestLLM:
    def test_structured_ok_and_accounting(self):
        llm = LLM(ScriptedBackend(['{"choice": "a"}']))
        result = llm.structured([{"role": "user", "content": "pick one"}], Pick, fallback=Pick(choice="z"))
        assert result.status == "ok" and result.value.choice == "a"
        assert llm.usage.llm_calls == 1 and llm.usage.prompt_tokens == 2 and llm.usage.completion_tokens == 2

    def test_one_repair_retry_then_ok(self):
        backend = ScriptedBackend(["not json at all", '```json\n{"choice": "b"}\n```'])
        llm = LLM(backend)
        result = llm.structured([{"role": "user", "content": "pick"}], Pick, fallback=Pick(choice="z"))
        assert result.status == "repaired" and result.value.choice == "b"
        assert "not valid" in backend.calls[1][-1]["content"]  # the repair prompt says what was wrong

    def test_fallback_after_failed_repair(self):
        llm = LLM(ScriptedBackend(['{"wrong": 1}', "{broken"]))
        result = llm.structured([{"role": "user", "content": "pick"}], Pick, fallback=Pick(choice="z"))
        assert result.status == "fallback" and result.value.choice == "z"
        assert llm.parse_failures == 1 and llm.usage.llm_calls == 2

    def test_transient_errors_are_retried_with_backoff(self):
        llm = LLM(ScriptedBackend([TransientLLMError("503"), TransientLLMError("timeout"), "fine"]), max_retries=2,
                  backoff_s=0.0)
        assert llm.generate([{"role": "user", "content": "x"}]) == "fine"
        assert llm.usage.llm_calls == 1

    def test_unreachable_after_retries_is_one_clear_error(self):
        llm = LLM(ScriptedBackend([TransientLLMError("connection refused")]), max_retries=1, backoff_s=0.0)
        with pytest.raises(LLMError, match="failed after 2 tries"):
            llm.generate([{"role": "user", "content": "x"}])

    @pytest.mark.parametrize("raw, ok", [('{"choice": "x"} trailing', True), ("prefix {\"choice\": \"y\"}", True),
                                         ("[]", False), ('{"choice": 3}', False), ("", False)])
    def test_parse(self, raw, ok):
        value, error = _parse(raw, Pick)
        assert (value is not None) == ok and (error == "") == ok


@pytest.mark.slow
class TestLocalBackend:
    def test_schema_constrained_json_from_the_real_model(self, local_llm):
        result = local_llm.structured(
            [{"role": "user", "content": "Is Paris in France? Reply as JSON {\"choice\": \"yes\" or \"no\"}."}],
            Pick, fallback=Pick(choice="fallback"), max_tokens=24)
        assert result.status in ("ok", "repaired") and result.value.choice
        assert local_llm.usage.prompt_tokens > 0 and local_llm.usage.completion_tokens > 0

    def test_missing_gguf_is_clear_error(self, tmp_path):
        from nodes.llm import LlamaCppBackend

        with pytest.raises(LLMError, match="GGUF model file not found"):
            LlamaCppBackend(str(tmp_path / "none.gguf"))


class TestOpenAIBackendTimeout:
    def test_a_server_that_never_answers_times_out_with_a_clear_error(self):
        """A real socket on 127.0.0.1 that accepts the request and never replies."""
        import socket
        import threading

        from nodes.llm import OpenAIBackend

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
