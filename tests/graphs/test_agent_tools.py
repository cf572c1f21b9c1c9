"""Agent mode with `graph.router.protocol: tools`: scripted native tool calls drive every guard path over the sample
index, as tests/graphs/test_agent.py does for the JSON protocol."""

import json

import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import ConfigError, LLMError
from switchyard.llm.backend import Reply
from switchyard.llm.cache import CachingBackend, ReplyStore
from switchyard.llm.client import LLM
from switchyard.nodes.router import ACTIONS, ROUTER_TOOLS, decision_from_tool_call
from tests.nodes.scripted import scripted_llm
from tests.scripted_backend import ScriptedBackend

TOOLS = ("graph.mode=agent", "graph.router.protocol=tools")


def _t(action, thought="", arguments=None, **args):
    """A reply calling the tool `action` (raw `arguments` text, or the keyword arguments as JSON)."""
    return Reply(
        thought, tool_calls=[{"name": action, "arguments": json.dumps(args) if arguments is None else arguments}]
    )


def _actions(result):
    return [s["action"] for s in result.steps]


def _guards(result):
    return [s["guard"] for s in result.steps]


def _router_calls(backend):
    return [(c, t) for c, t in zip(backend.calls, backend.tools) if c[0]["content"].startswith("You control")]


class TestToolCalls:
    def test_happy_path_react(self, make_pipeline):
        llm, backend = scripted_llm(
            router=[
                _t("retrieve", "search first", query="knuckle coupler patent"),
                _t("rerank"),
                _t("grade"),
                _t("answer", "enough evidence"),
            ],
            answer="The Janney coupler was patented by Eli Janney in 1873 [1].",
        )
        result = make_pipeline(*TOOLS, llm=llm).ask("Who patented the knuckle coupler?")
        assert _actions(result) == ["retrieve", "rerank", "grade", "answer"]
        assert _guards(result) == [None] * 4 and result.failures.guards == {}
        assert result.steps[0]["args"] == {"query": "knuckle coupler patent"}
        assert result.steps[0]["thought"] == "search first" and result.steps[3]["thought"] == "enough evidence"
        assert result.citations[0].title == "Railway couplers" and not result.abstained
        router = _router_calls(backend)
        assert len(router) == 4 and all(t == (ROUTER_TOOLS, "auto") for _, t in router)
        assert "call exactly one tool" in router[0][0][0]["content"]
        assert "Earlier steps:" in router[-1][0][-1]["content"]
        # only the router offers tools; every other call is a plain or structured one
        assert all(
            t == (None, None)
            for c, t in zip(backend.calls, backend.tools)
            if not c[0]["content"].startswith("You control")
        )
        assert all(s["llm_calls"] == 1 for s in result.steps)

    def test_tools_cover_every_action_with_their_arguments(self):
        names = [t["function"]["name"] for t in ROUTER_TOOLS]
        assert names == list(ACTIONS)
        params = {t["function"]["name"]: set(t["function"]["parameters"]["properties"]) for t in ROUTER_TOOLS}
        assert params == {
            "rewrite": {"query"},
            "retrieve": {"query"},
            "rerank": set(),
            "grade": set(),
            "answer": set(),
            "abstain": {"reason"},
        }

    @pytest.mark.parametrize(
        "reply, error",
        [
            (Reply("I would like to search, please!"), "no tool call"),
            (_t("search_web", query="x"), "unknown tool 'search_web'"),
            (_t("retrieve", arguments='{"query": "gauge'), "arguments are not JSON"),
            (_t("retrieve", arguments='["gauge"]'), "arguments are not a JSON object"),
            (_t("retrieve", query="gauge " * 60), "query: String should have at most 200 characters"),
        ],
    )
    def test_invalid_calls_say_why(self, reply, error):
        decision, why = decision_from_tool_call(reply)
        assert decision is None and why.startswith(error)

    def test_no_tool_call_is_repaired_once_then_falls_back_to_fixed_edges(self, make_pipeline):
        llm, backend = scripted_llm(
            router=Reply("I would like to search, please!"),
            rewrite='{"query": "knuckle coupler"}',
            answer="The Janney coupler was patented by Eli Janney in 1873 [1].",
        )
        result = make_pipeline(*TOOLS, llm=llm).ask("Who patented the knuckle coupler?")
        assert _actions(result) == ["rewrite", "retrieve", "rerank", "grade", "answer"]
        assert set(_guards(result)) == {"invalid"} and result.failures.parse_fallbacks == 5
        repair = _router_calls(backend)[1][0]
        assert repair[-2] == {"role": "assistant", "content": "I would like to search, please!"}
        assert "not a valid tool call (no tool call)" in repair[-1]["content"]
        assert all(s["llm_calls"] == 2 for s in result.steps)  # each decision: the call and its repair
        assert all("repairs" not in s for s in result.steps)  # no repair succeeded
        assert not result.abstained

    def test_unknown_tool_gets_one_repair(self, make_pipeline):
        llm, backend = scripted_llm(
            router=[
                _t("search_web", query="x"),
                _t("retrieve", query="blue flag"),
                _t("rerank"),
                _t("grade"),
                _t("answer"),
            ],
            answer="Blue flags protect workers on a track [1].",
        )
        result = make_pipeline(*TOOLS, llm=llm).ask("What do blue flags protect?")
        assert _actions(result)[0] == "retrieve" and _guards(result)[0] is None
        repair = _router_calls(backend)[1][0]
        assert repair[-2]["content"] == 'search_web({"query": "x"})'
        assert "unknown tool 'search_web'" in repair[-1]["content"]
        assert result.steps[0]["repairs"] == 1 and all("repairs" not in s for s in result.steps[1:])

    def test_loop_is_detected_and_not_executed_again(self, make_pipeline):
        llm, _ = scripted_llm(router=_t("retrieve", query="coupler"), answer="NOT FOUND")
        result = make_pipeline(*TOOLS, llm=llm).ask("Who patented the knuckle coupler?")
        assert _actions(result).count("retrieve") == 1
        assert _actions(result)[:4] == ["retrieve", "rerank", "grade", "answer"]
        assert _guards(result)[1:4] == ["repeat"] * 3

    def test_answer_before_any_retrieval_is_refused(self, make_pipeline):
        llm, _ = scripted_llm(
            router=[_t("answer"), _t("retrieve", query="gauge"), _t("rerank"), _t("grade"), _t("answer")],
            rewrite='{"query": "standard gauge"}',
            answer="Standard gauge is 1,435 mm [1].",
        )
        result = make_pipeline(*TOOLS, llm=llm).ask("What is standard gauge?")
        assert result.steps[0]["action"] == "rewrite" and result.steps[0]["guard"] == "premature_answer"
        assert _actions(result)[-1] == "answer" and not result.abstained

    def test_query_sharing_nothing_with_the_run_is_dropped(self, make_pipeline):
        llm, _ = scripted_llm(
            router=[_t("retrieve", query="a short search engine query"), _t("rerank"), _t("grade"), _t("answer")],
            answer="Blue flags protect workers on a track [1].",
        )
        result = make_pipeline(*TOOLS, llm=llm).ask("What do blue flags protect?")
        first = result.steps[0]
        assert first["guard"] == "ungrounded_query" and first["args"] == {"query": "What do blue flags protect?"}

    def test_budget_exhausted_answers_or_abstains(self, make_pipeline):
        llm, _ = scripted_llm(
            router=lambda n: _t("retrieve", query=f"blue flags {n}"),
            answer="Blue flags protect workers on a track [1].",
        )
        result = make_pipeline(*TOOLS, "graph.router.max_steps=3", llm=llm).ask("What do blue flags protect?")
        assert _actions(result) == ["retrieve", "retrieve", "retrieve", "answer"] and _guards(result)[-1] == "budget"
        assert not result.abstained and result.citations
        llm, _ = scripted_llm(router=lambda n: _t("rewrite", query=f"blue flag variant {n}"))
        result = make_pipeline(*TOOLS, "graph.router.max_steps=2", llm=llm).ask("What do blue flags protect?")
        assert _actions(result) == ["rewrite", "rewrite", "abstain"] and _guards(result)[-1] == "budget"
        assert result.abstained

    def test_explicit_abstain_with_reason_under_zeroshot_and_required(self, make_pipeline):
        llm, backend = scripted_llm(
            router=[_t("retrieve", query="soufflé"), _t("abstain", reason="nothing about cooking")]
        )
        result = make_pipeline(
            *TOOLS, "graph.router.strategy=zeroshot", "graph.router.tool_choice=required", llm=llm
        ).ask("How do I bake a soufflé?")
        assert result.abstained and _actions(result) == ["retrieve", "abstain"]
        assert "nothing about cooking" in result.citation_check["abstain_reason"]
        router = _router_calls(backend)
        assert all(t == (ROUTER_TOOLS, "required") for _, t in router)
        assert all("Examples:" not in m["content"] for c, _ in router for m in c)

    def test_json_and_tools_runs_have_the_same_step_records(self, make_pipeline):
        answer = "Standard gauge is 1,435 mm [1]."
        llm, _ = scripted_llm(router=[_t("retrieve", query="gauge"), _t("answer")], answer=answer)
        tools = make_pipeline(*TOOLS, llm=llm).ask("What is standard gauge?")
        llm, _ = scripted_llm(
            router=[
                json.dumps({"thought": "", "action": "retrieve", "query": "gauge"}),
                json.dumps({"thought": "", "action": "answer"}),
            ],
            answer=answer,
        )
        plain = make_pipeline("graph.mode=agent", llm=llm).ask("What is standard gauge?")
        assert [set(s) for s in tools.steps] == [set(s) for s in plain.steps]
        assert [(s["action"], s["args"], s["guard"]) for s in tools.steps] == [
            (s["action"], s["args"], s["guard"]) for s in plain.steps
        ]
        assert tools.answer == plain.answer


class TestConfigAndCache:
    def test_plan_strategy_cannot_use_tools(self):
        with pytest.raises(ConfigError, match="protocol=tools chooses one action per call"):
            load_config(None, [*TOOLS, "graph.router.strategy=plan"])

    def test_tool_calls_are_recorded_and_replayed(self, tmp_path):
        ask = [{"role": "user", "content": "next?"}]
        identity = {"backend": "local", "model": "tiny.gguf"}
        inner = ScriptedBackend([_t("retrieve", "look", query="gauge")])
        recorded = LLM(CachingBackend(inner, ReplyStore(tmp_path), identity)).call_tools(ask, ROUTER_TOOLS)
        replay = LLM(CachingBackend(None, ReplyStore(tmp_path), identity))
        assert replay.call_tools(ask, ROUTER_TOOLS) == recorded and recorded.tool_calls[0]["name"] == "retrieve"
        assert inner.tools == [(ROUTER_TOOLS, "auto")]
        with pytest.raises(LLMError, match="no recorded LLM reply"):
            replay.call_tools(ask, ROUTER_TOOLS, tool_choice="required")  # the tool choice is part of the key


@pytest.mark.slow
def test_local_model_chooses_by_native_tool_calls(make_pipeline):
    """The packaged GGUF under llama-cpp-python's function-calling chat format: whatever it chooses, every step is
    a recorded decision within the budget and the run ends with an answer or an abstention."""
    pipe = make_pipeline(
        *TOOLS,
        "graph.router.max_steps=3",
        "llm.chat_format=chatml-function-calling",
        "llm.max_tokens=64",
        "graph.router.strategy=zeroshot",
    )
    result = pipe.ask("Who patented the knuckle coupler?")
    steps = result.steps
    assert 1 <= len(steps) <= 4 and steps[-1]["action"] in ("answer", "abstain")
    assert all(
        s["action"] in ACTIONS
        and s["guard"] in (None, "invalid", "repeat", "premature_answer", "ungrounded_query", "budget")
        for s in steps
    )
    assert all(s["llm_calls"] >= 1 for s in steps if s["guard"] != "budget")  # each decision asked the model
    assert result.answer.strip()
