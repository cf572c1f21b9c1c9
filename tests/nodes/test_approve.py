"""A human in the loop (graph.router.approve): the run pauses before each action the router chose; approve, edit
and reject resume it; every answer is in the step records; a pause expires; paused runs survive in a SQLite
checkpointer opened again (what a restarted server does)."""

import sqlite3

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from switchyard.errors import ApprovalError, ConfigError, PauseExpired, UnknownThread
from switchyard.graphs.build import checkpoint_serde
from switchyard.graphs.results import AskResult, Paused
from switchyard.llm.client import LLM
from switchyard.nodes.approve import Approval, checked_arguments
from tests.nodes.scripted import zeroshot_agent
from tests.scripted_backend import ScriptedBackend

QUESTION = "Who patented the knuckle coupler?"


def approve_pipeline(make_pipeline, *overrides, checkpointer=None):
    llm = LLM(ScriptedBackend(zeroshot_agent), max_retries=0, backoff_s=0.0)
    pipe = make_pipeline(
        "graph.mode=agent", "graph.router.strategy=zeroshot", "graph.router.approve=true", *overrides, llm=llm
    )
    if checkpointer is not None:
        pipe = type(pipe)(pipe.config, pipe.resources.models, checkpointer=checkpointer)
    return pipe


def approve_all(pipe, result, answer=Approval(decision="approve")) -> tuple[AskResult, list[Paused]]:  # noqa: B008
    pauses = []
    while isinstance(result, Paused):
        pauses.append(result)
        result = pipe.resume(result.thread_id, answer)
    return result, pauses


class TestCheckedArguments:
    def test_each_action_takes_its_own_arguments(self):
        assert checked_arguments("retrieve", {"query": "  gauge "}) == {"query": "gauge"}
        assert checked_arguments("abstain", {"reason": "no idea"}) == {"reason": "no idea"}
        assert checked_arguments("rerank", {}) == {} and checked_arguments("rewrite", None) == {}

    @pytest.mark.parametrize(
        "action, args, said",
        [
            ("retrieve", {"query": ""}, "needs a non-empty query"),
            ("retrieve", {"query": "x" * 201}, "at most 200 characters"),
            ("rerank", {"query": "x"}, "rerank takes no arguments, not query"),
            ("abstain", {"query": "x"}, "abstain takes reason, not query"),
            ("retrieve", {"query": 3}, "are strings"),
        ],
    )
    def test_bad_edits_are_refused(self, action, args, said):
        with pytest.raises(ApprovalError, match=said):
            checked_arguments(action, args)

    def test_an_answer_has_one_of_three_decisions(self):
        with pytest.raises(ValueError):
            Approval.model_validate({"decision": "maybe"})


class TestApprove:
    def test_pauses_before_each_action_then_approved_runs_to_the_answer(self, make_pipeline):
        pipe = approve_pipeline(make_pipeline)
        first = pipe.start(QUESTION)
        assert isinstance(first, Paused) and first.pending.action == "retrieve"
        assert first.pending.args == {"query": "knuckle coupler patent"} and first.pending.step == 1
        assert first.pending.thought == "do retrieve" and first.question == QUESTION
        result, pauses = approve_all(pipe, first)
        assert [p.pending.action for p in pauses] == ["retrieve", "rerank", "grade", "answer"]
        assert {p.thread_id for p in pauses} == {first.thread_id} and result.run_id == first.thread_id
        assert [s["action"] for s in result.steps] == ["retrieve", "rerank", "grade", "answer"]
        assert all(s["human"] == {"decision": "approve"} for s in result.steps)
        assert not result.abstained and result.citations[0].title == "Railway couplers"
        assert [e.node for e in result.trace].count("approve") == 4
        assert pipe.pending(first.thread_id) is None  # a finished thread is forgotten
        with pytest.raises(UnknownThread):
            pipe.resume(first.thread_id, Approval(decision="approve"))

    def test_an_edit_runs_with_the_new_arguments_and_is_recorded(self, make_pipeline):
        pipe = approve_pipeline(make_pipeline)
        first = pipe.start(QUESTION)
        with pytest.raises(ApprovalError, match="needs a non-empty query"):
            pipe.resume(first.thread_id, Approval(decision="edit", arguments={"query": " "}))
        assert pipe.pending(first.thread_id) == first  # a refused edit leaves the run paused
        second = pipe.resume(first.thread_id, Approval(decision="edit", arguments={"query": "Janney coupler 1873"}))
        assert second.pending.action == "rerank"
        result, _ = approve_all(pipe, second)
        step = result.steps[0]
        assert step["args"] == {"query": "Janney coupler 1873"} and result.queries[0] == "Janney coupler 1873"
        assert step["human"] == {"decision": "edit", "proposed": {"query": "knuckle coupler patent"}}

    def test_a_rejection_is_a_step_and_the_agent_decides_again(self, make_pipeline):
        pipe = approve_pipeline(make_pipeline)
        first = pipe.start(QUESTION)
        second = pipe.resume(first.thread_id, Approval(decision="reject", reason="search the patent year"))
        assert isinstance(second, Paused) and second.pending.step == 2
        result, _ = approve_all(pipe, second)
        rejected = result.steps[0]
        assert rejected["human"] == {"decision": "reject", "reason": "search the patent year"}
        assert rejected["observation"] == "retrieve rejected by the reviewer: search the patent year"
        assert result.answer or result.abstained
        assert max(s["step"] for s in result.steps) <= pipe.config.graph.router.max_steps + 1

    def test_rejecting_every_action_still_ends_within_the_budget(self, make_pipeline):
        pipe = approve_pipeline(make_pipeline, "graph.router.max_steps=3")
        result, pauses = approve_all(pipe, pipe.start(QUESTION), Approval(decision="reject"))
        assert len(pauses) == 4 and pauses[-1].pending.guard == "budget"
        assert result.abstained and [s["human"]["decision"] for s in result.steps] == ["reject"] * 4
        assert result.steps[-1]["action"] == "abstain"

    def test_an_unanswered_pause_expires(self, make_pipeline, monkeypatch):
        pipe = approve_pipeline(make_pipeline, "graph.router.approve_timeout_s=60")
        first = pipe.start(QUESTION)
        assert 59 <= (first.expires_at.timestamp() - __import__("time").time()) <= 60
        monkeypatch.setattr("switchyard.graphs.pipeline.time.time", lambda: first.expires_at.timestamp() + 1)
        with pytest.raises(PauseExpired, match="expired"):
            pipe.resume(first.thread_id, Approval(decision="approve"))
        assert pipe.pending(first.thread_id) is None

    def test_a_pause_survives_in_a_sqlite_checkpointer_opened_again(self, make_pipeline, tmp_path):
        path = tmp_path / "checkpoints.sqlite3"
        saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=checkpoint_serde())
        first = approve_pipeline(make_pipeline, checkpointer=saver).start(QUESTION)
        saver.conn.close()
        reopened = SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=checkpoint_serde())
        pipe = approve_pipeline(make_pipeline, checkpointer=reopened)
        assert pipe.pending(first.thread_id) == first
        result, _ = approve_all(pipe, pipe.resume(first.thread_id, Approval(decision="approve")))
        assert not result.abstained and [s["action"] for s in result.steps][-1] == "answer"
        reopened.conn.close()

    def test_ask_refuses_and_start_needs_approve(self, make_pipeline):
        with pytest.raises(ConfigError, match="graph.router.approve"):
            approve_pipeline(make_pipeline).ask(QUESTION)
        with pytest.raises(ConfigError, match="use ask"):
            make_pipeline("graph.mode=agent").start(QUESTION)

    def test_a_fixed_pipeline_cannot_approve(self, make_pipeline):
        with pytest.raises(ConfigError, match="needs graph.mode: agent"):
            make_pipeline("graph.router.approve=true")


def test_approve_enters_the_dumped_config_only_when_set():
    from switchyard.configs.loader import config_hash, config_to_dict, load_config

    router = config_to_dict(load_config("agent"))["graph"]["router"]
    assert "approve" not in router and "approve_timeout_s" not in router
    on = load_config("agent", ["graph.router.approve=true"])
    assert config_to_dict(on)["graph"]["router"]["approve"] is True
    assert config_hash(on) != config_hash(load_config("agent"))
