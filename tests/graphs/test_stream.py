"""Pipeline.stream / astream: the run as events, in order, ending with the same result ask() gives."""

import asyncio
import json
import threading

import pytest

from switchyard.configs.loader import CONFIG_DIR
from switchyard.errors import LLMError, QuestionError
from tests.graphs.test_concurrency import essence
from tests.nodes.scripted import scripted_llm

QUESTION = "Who patented the knuckle coupler?"
ANSWER = "The Janney coupler was patented by Eli Janney in 1873 [1]."


def kinds(events):
    """Event types with the node they belong to, tokens collapsed into one marker per run of tokens."""
    out = []
    for e in events:
        label = e.event + (f":{e.node}" if hasattr(e, "node") else "")
        if e.event == "token" and out and out[-1] == "token":
            continue
        out.append(label)
    return out


class TestStreamFixed:
    def test_event_order_and_final_answer(self, make_pipeline):
        llm, _ = scripted_llm(answer=ANSWER)
        pipe = make_pipeline(llm=llm)
        events = list(pipe.stream(QUESTION))
        assert kinds(events) == [
            "run_start",
            "node_start:rewrite",
            "node_end:rewrite",
            "node_start:retrieve",
            "node_end:retrieve",
            "passages:retrieve",
            "node_start:rerank",
            "node_end:rerank",
            "passages:rerank",
            "node_start:grade",
            "node_end:grade",
            "passages:grade",
            "node_start:answer",
            "token",
            "node_end:answer",
            "answer",
        ]
        start, final = events[0], events[-1].result
        assert start.run_id == final.run_id and start.config_hash == final.config.hash
        assert "".join(e.text for e in events if e.event == "token") == ANSWER
        rewrite_end = events[2]
        assert rewrite_end.llm_calls == 1 and rewrite_end.prompt_tokens > 0 and rewrite_end.ms > 0
        passages = events[5].passages
        assert passages and set(passages[0].to_json()) == {"doc_id", "title", "source", "page", "score"}
        assert final.citations and not final.abstained
        json.dumps([e.to_json() for e in events])  # every event's JSON form is plain JSON

    def test_result_equals_ask(self, make_pipeline):
        llm, _ = scripted_llm(answer=ANSWER)
        pipe = make_pipeline(llm=llm)
        streamed = list(pipe.stream(QUESTION))[-1].result
        asked = pipe.ask(QUESTION)
        assert essence(streamed) == essence(asked)
        assert set(streamed.to_json()) == set(asked.to_json())

    def test_grader_and_rewrite_tokens_never_reach_the_stream(self, make_pipeline):
        llm, _ = scripted_llm(rewrite='{"query": "REWRITE-TOKEN"}', grade='{"relevant": true}', answer=ANSWER)
        events = list(make_pipeline("grade.method=llm", llm=llm).stream(QUESTION))
        tokens = "".join(e.text for e in events if e.event == "token")
        assert tokens == ANSWER and "REWRITE-TOKEN" not in tokens and "relevant" not in tokens

    def test_no_llm_pipeline_streams_without_tokens(self, make_pipeline):
        events = list(make_pipeline(config_file=CONFIG_DIR / "no-llm.yaml").stream(QUESTION))
        assert not [e for e in events if e.event == "token"]
        assert events[-1].event == "answer" and events[-1].result.citations

    def test_a_failing_run_ends_with_one_error_event(self, make_pipeline):
        llm, _ = scripted_llm(answer=LLMError("LLM server at http://x refused the request (HTTP 401): bad key"))
        events = list(make_pipeline(llm=llm).stream(QUESTION))
        assert events[-1].to_json() == {
            "event": "error",
            "message": "LLM server at http://x refused the request (HTTP 401): bad key",
        }
        assert not [e for e in events if e.event == "answer"]

    def test_empty_question_raises_before_streaming(self, make_pipeline):
        with pytest.raises(QuestionError):
            make_pipeline(config_file=CONFIG_DIR / "no-llm.yaml").stream("  ")

    def test_closing_the_stream_cancels_the_run(self, make_pipeline):
        entered, release = threading.Event(), threading.Event()

        def slow_answer(_n):
            entered.set()
            release.wait(30)
            return ANSWER

        llm, backend = scripted_llm(answer=slow_answer)
        events = make_pipeline(llm=llm).stream(QUESTION)
        for event in events:
            if event.event == "node_end" and event.node == "rewrite":
                break
        events.close()  # the client went away after the rewrite
        release.set()
        assert len(backend.calls) == 1 and not entered.is_set()  # the answer was never generated


class TestStreamAgent:
    def test_decisions_are_streamed_after_each_router_step(self, make_pipeline):
        router = [
            json.dumps({"thought": "search", "action": "retrieve", "query": "knuckle coupler"}),
            json.dumps({"action": "rerank"}),
            json.dumps({"action": "grade"}),
            json.dumps({"action": "answer"}),
        ]
        llm, _ = scripted_llm(router=router, answer=ANSWER)
        events = list(make_pipeline("graph.mode=agent", llm=llm).stream(QUESTION))
        decisions = [e for e in events if e.event == "decision"]
        assert [d.action for d in decisions] == ["retrieve", "rerank", "grade", "answer"]
        assert decisions[0].args == {"query": "knuckle coupler"} and decisions[0].thought == "search"
        labels = kinds(events)
        assert labels[:5] == ["run_start", "node_start:router", "node_end:router", "decision", "node_start:retrieve"]
        assert labels[-3:] == ["token", "node_end:answer", "answer"]
        assert events[-1].result.steps[0]["action"] == "retrieve"


class TestAsync:
    def test_astream_and_aask_match_the_sync_api(self, make_pipeline):
        llm, _ = scripted_llm(answer=ANSWER)
        pipe = make_pipeline(llm=llm)

        async def collect():
            events = [e async for e in pipe.astream(QUESTION)]
            return events, await pipe.aask(QUESTION)

        events, asked = asyncio.run(collect())
        assert kinds(events) == kinds(list(pipe.stream(QUESTION)))
        assert essence(events[-1].result) == essence(asked) == essence(pipe.ask(QUESTION))

    def test_concurrent_astreams_keep_their_own_tokens(self, make_pipeline):
        answers = {
            "Who patented the knuckle coupler?": ANSWER,
            "What is standard gauge?": "Standard gauge is 1,435 mm between the rails [1].",
        }

        def answer_for(messages, schema):
            if messages[0]["content"].startswith("Rewrite"):
                return json.dumps({"query": messages[-1]["content"]})
            return next(a for q, a in answers.items() if q in messages[-1]["content"])

        from switchyard.llm.client import LLM
        from tests.scripted_backend import ScriptedBackend

        pipe = make_pipeline(llm=LLM(ScriptedBackend(answer_for)))

        async def one(question):
            return [e async for e in pipe.astream(question)]

        async def both():
            return await asyncio.gather(*(one(q) for q in answers))

        for question, events in zip(answers, asyncio.run(both())):
            tokens = "".join(e.text for e in events if e.event == "token")
            assert tokens == answers[question]
            assert events[-1].result.question == question


@pytest.mark.slow
class TestStreamRealModel:
    def test_local_model_streams_tokens_and_matches_ask(self, make_pipeline, local_llm):
        pipe = make_pipeline(llm=local_llm)
        events = list(pipe.stream(QUESTION))
        labels = kinds(events)
        assert labels[-1] == "answer"
        tokens = [e.text for e in events if e.event == "token"]
        if not events[-1].result.abstained or "model found no answer" not in events[-1].result.citation_check.get(
            "abstain_reason", ""
        ):
            assert len(tokens) > 1  # token by token, not one block
        i = labels.index("node_start:answer")
        assert labels[i + 1] in ("token", "node_end:answer") and "token" not in labels[:i]
        assert essence(events[-1].result) == essence(pipe.ask(QUESTION))
