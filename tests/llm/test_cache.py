"""The LLM reply cache: record, replay (no model), keys, misses, streaming and accounting, concurrent writers."""

import json
import threading

import pytest

from switchyard.configs.loader import load_config
from switchyard.configs.schema import LocalLLMConfig, OpenAILLMConfig
from switchyard.errors import ConfigError, LLMCacheMiss, LLMError
from switchyard.llm.backend import Reply
from switchyard.llm.cache import CachingBackend, ReplyStore, request_key
from switchyard.llm.client import LLM
from switchyard.llm.factory import build_llm
from switchyard.run_context import RunContext
from tests.scripted_backend import ScriptedBackend
from tests.together import run_together

IDENTITY = {"backend": "local", "model": "tiny.gguf", "n_ctx": 2048, "repeat_penalty": 1.1}
ASK = [
    {"role": "system", "content": "Answer briefly from the passages."},
    {"role": "user", "content": "Who patented the knuckle coupler in 1873?"},
]


def logged(root) -> list[dict]:
    """The entries of a reply cache's append log, one per line."""
    log = root / "replies.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def recorder(tmp_path, replies=("Eli Janney patented it [1].",)):
    inner = ScriptedBackend(list(replies))
    return CachingBackend(inner, ReplyStore(tmp_path / "cache"), IDENTITY, default_seed=0), inner


def replayer(tmp_path):
    return CachingBackend(None, ReplyStore(tmp_path / "cache"), IDENTITY, default_seed=0)


class TestRecordReplay:
    def test_replay_answers_like_the_recorded_run_with_tokens_and_usage(self, tmp_path):
        backend, inner = recorder(tmp_path)
        with (run := RunContext()).metered() as recorded_usage:
            recorded = LLM(backend).generate(ASK, run=run)
        assert len(inner.calls) == 1 and backend.recorded == 1

        tokens: list[str] = []
        with (run := RunContext()).metered() as replayed_usage:
            replayed = LLM(replayer(tmp_path)).generate(ASK, on_token=tokens.append, run=run)
        assert replayed == recorded == "Eli Janney patented it [1]."
        assert "".join(tokens) == recorded and len(tokens) > 1  # streamed piece by piece
        assert (
            (replayed_usage.llm_calls, replayed_usage.prompt_tokens, replayed_usage.completion_tokens)
            == (recorded_usage.llm_calls, recorded_usage.prompt_tokens, recorded_usage.completion_tokens)
            == (1, 12, 5)
        )
        assert (recorded_usage.cached_calls, replayed_usage.cached_calls) == (0, 1)  # latency is not the model's

    def test_structured_replies_replay_with_their_repair_round(self, tmp_path):
        from pydantic import BaseModel

        class Pick(BaseModel):
            choice: str

        backend, _ = recorder(tmp_path, ["not json", '{"choice": "b"}'])
        first = LLM(backend).structured(ASK, Pick, fallback=Pick(choice="z"))
        again = LLM(replayer(tmp_path)).structured(ASK, Pick, fallback=Pick(choice="z"))
        assert first.status == again.status == "repaired" and again.value.choice == "b"

    def test_a_seen_request_is_not_sent_to_the_model_again(self, tmp_path):
        backend, inner = recorder(tmp_path)
        llm = LLM(backend)
        assert llm.generate(ASK) == llm.generate(ASK)
        assert len(inner.calls) == 1 and (backend.recorded, backend.replayed) == (1, 1)

    def test_the_file_holds_the_request_and_the_reply(self, tmp_path):
        backend, _ = recorder(tmp_path)
        LLM(backend, max_tokens=64).generate(ASK)
        [entry] = logged(tmp_path / "cache")
        assert entry["key"] == request_key(entry["request"])
        assert entry["request"]["messages"] == ASK and entry["request"]["max_tokens"] == 64
        assert entry["request"]["model"] == "tiny.gguf" and entry["request"]["seed"] == 0  # the backend's default
        assert entry["reply"] == {"text": "Eli Janney patented it [1].", "prompt_tokens": 12, "completion_tokens": 5}

    def test_a_reply_cut_short_by_cancellation_is_not_stored(self, tmp_path):
        backend, _ = recorder(tmp_path)
        cancelled = threading.Event()
        cancelled.set()
        backend.chat(ASK, max_tokens=16, temperature=0.0, cancelled=cancelled)
        assert backend.recorded == 0 and not logged(tmp_path / "cache")


class TestKeys:
    @pytest.mark.parametrize(
        "change",
        [
            {"seed": 7},
            {"temperature": 0.7},
            {"max_tokens": 99},
            {"json_schema": {"type": "object"}},
            {"messages": ASK[:1] + [{"role": "user", "content": "Who patented it?"}]},
        ],
    )
    def test_every_part_of_the_request_is_in_the_key(self, tmp_path, change):
        backend, _ = recorder(tmp_path)
        call = {"messages": ASK, "max_tokens": 32, "temperature": 0.0, "json_schema": None, "seed": None}
        backend.chat(**{k: v for k, v in call.items()})
        with pytest.raises(LLMCacheMiss):
            replayer(tmp_path).chat(**{**call, **change})
        replayer(tmp_path).chat(**call)  # the unchanged request is there

    def test_the_model_identity_is_in_the_key_and_an_explicit_default_seed_is_the_same_request(self, tmp_path):
        backend, _ = recorder(tmp_path)
        backend.chat(ASK, max_tokens=32, temperature=0.0)
        assert replayer(tmp_path).chat(ASK, max_tokens=32, temperature=0.0, seed=0).text  # seed None meant 0
        other = CachingBackend(None, ReplyStore(tmp_path / "cache"), {**IDENTITY, "model": "bigger.gguf"})
        with pytest.raises(LLMCacheMiss):
            other.chat(ASK, max_tokens=32, temperature=0.0, seed=0)

    def test_options_a_backend_may_add_count_only_when_given(self, tmp_path):
        backend = CachingBackend(None, ReplyStore(tmp_path), IDENTITY)
        base = backend.request(ASK, max_tokens=8, temperature=0.0, json_schema=None, seed=1)
        assert backend.request(ASK, max_tokens=8, temperature=0.0, json_schema=None, seed=1, tools=None) == base
        with_tools = backend.request(ASK, max_tokens=8, temperature=0.0, json_schema=None, seed=1, tools=[{"x": 1}])
        assert request_key(with_tools) != request_key(base)


class TestMisses:
    def test_a_miss_names_the_request(self, tmp_path):
        (tmp_path / "cache").mkdir()
        with pytest.raises(LLMCacheMiss) as err:
            LLM(replayer(tmp_path)).generate(ASK, max_tokens=40)
        message = str(err.value)
        assert "no recorded LLM reply" in message and str(tmp_path / "cache") in message
        assert "Who patented the knuckle coupler" in message and "Answer briefly" in message
        assert "max_tokens 40" in message and "seed 0" in message and "tiny.gguf" in message
        assert "\n" not in message and isinstance(err.value, LLMError)  # the CLI prints it as one line

    def test_a_missing_folder_is_said(self, tmp_path):
        with pytest.raises(LLMCacheMiss, match="no such folder"):
            replayer(tmp_path / "nowhere").chat(ASK, max_tokens=8, temperature=0.0)

    def test_a_hand_broken_file_is_a_clear_error(self, tmp_path):
        backend, _ = recorder(tmp_path)
        backend.chat(ASK, max_tokens=8, temperature=0.0)
        log = tmp_path / "cache" / "replies.jsonl"
        log.write_text("{broken\n")
        with pytest.raises(LLMError, match="is not a recorded reply"):
            replayer(tmp_path).chat(ASK, max_tokens=8, temperature=0.0)


class TestBuildLLM:
    def test_replay_builds_no_model(self, tmp_path, monkeypatch):
        from switchyard.llm import factory

        def no_model(*args, **kwargs):
            raise AssertionError("a replay must not build a model backend")

        monkeypatch.setattr(factory, "LlamaCppBackend", no_model)
        monkeypatch.setattr(factory, "OpenAIBackend", no_model)
        llm = build_llm(LocalLLMConfig(model_path="/nowhere/model.gguf", cache_dir=str(tmp_path), replay=True))
        assert isinstance(llm.backend, CachingBackend) and llm.backend.replay
        assert llm.backend.identity["model"] == "model.gguf"
        llm.warm_up()  # nothing to load

    def test_recording_wraps_the_configured_backend(self, tmp_path):
        llm = build_llm(OpenAILLMConfig(base_url="http://127.0.0.1:9/v1", model="m", cache_dir=str(tmp_path)))
        assert isinstance(llm.backend, CachingBackend) and not llm.backend.replay
        assert llm.backend.base_url == "http://127.0.0.1:9/v1" and llm.backend.default_seed is None

    def test_replay_needs_a_cache_folder(self):
        with pytest.raises(ConfigError, match="llm.replay needs llm.cache_dir"):
            load_config(None, ["llm.replay=true"])


class TestConcurrency:
    def test_concurrent_writers_leave_whole_files_and_consistent_replies(self, tmp_path):
        n = 8

        def reply(messages, schema):
            return f"answer to {messages[-1]['content']}"

        backends = [
            CachingBackend(ScriptedBackend(reply), ReplyStore(tmp_path / "cache"), IDENTITY) for _ in range(2)
        ]  # two writers of one folder, like two processes

        def work(i: int) -> None:
            for k in range(60):  # half the keys are written by every thread at once
                question = f"q{k}" if k % 2 else f"q{k}-{i}"
                messages = [{"role": "user", "content": question}]
                reply_ = backends[i % 2].chat(messages, max_tokens=8, temperature=0.0, seed=1)
                assert reply_.text == f"answer to {question}"

        run_together(n, work)
        entries = logged(tmp_path / "cache")  # every line whole (logged() parses each one)
        assert len({e["key"] for e in entries}) == 30 + 30 * n  # shared odd keys, one even key per thread
        assert not list((tmp_path / "cache").rglob("*.tmp"))
        replay = replayer(tmp_path)
        for entry in entries:
            again = replay.chat(entry["request"]["messages"], max_tokens=8, temperature=0.0, seed=1)
            assert again == Reply(**entry["reply"]) and again.text.startswith("answer to q")


def test_replay_inside_a_run_context_uses_the_runs_seed(tmp_path):
    backend, _ = recorder(tmp_path)
    LLM(backend).generate(ASK, run=RunContext(seed=5))
    [entry] = logged(tmp_path / "cache")
    assert entry["request"]["seed"] == 5


class TestLayouts:
    def test_a_torn_last_line_is_trimmed_on_read_and_before_the_next_append(self, tmp_path):
        backend, _ = recorder(tmp_path)
        backend.chat(ASK, max_tokens=8, temperature=0.0)
        log = tmp_path / "cache" / "replies.jsonl"
        whole = log.read_bytes()
        log.write_bytes(whole + b'{"key": "abc", "request": {"mess')  # a writer died mid-line
        assert replayer(tmp_path).chat(ASK, max_tokens=8, temperature=0.0).text == "Eli Janney patented it [1]."
        backend, _ = recorder(tmp_path)
        backend.chat(ASK, max_tokens=9, temperature=0.0)
        assert log.read_bytes().startswith(whole) and [
            e["request"]["max_tokens"] for e in logged(tmp_path / "cache")
        ] == [8, 9]

    def test_packed_replies_and_the_old_one_file_per_key_layout_are_read(self, tmp_path):
        import lzma

        from switchyard.llm.cache import entry_line

        backend, _ = recorder(tmp_path, ["one", "two"])
        backend.chat(ASK, max_tokens=8, temperature=0.0)
        backend.chat(ASK, max_tokens=9, temperature=0.0)
        first, second = logged(tmp_path / "cache")
        (tmp_path / "cache" / "replies.jsonl").unlink()
        with lzma.open(tmp_path / "cache" / "replies.jsonl.xz", "wt", encoding="utf-8") as fh:
            fh.write(entry_line(first) + "\n")
        old = tmp_path / "cache" / second["key"][:2] / f"{second['key']}.json"
        old.parent.mkdir()
        old.write_text(json.dumps(second, indent=1))
        replay = replayer(tmp_path)
        assert replay.chat(ASK, max_tokens=8, temperature=0.0).text == "one"
        assert replay.chat(ASK, max_tokens=9, temperature=0.0).text == "two"
        assert replay.store.keys() == {first["key"], second["key"]}
        with pytest.raises(LLMCacheMiss):
            replay.chat(ASK, max_tokens=10, temperature=0.0)
