"""The router strategies added to zeroshot/react/plan (zeroshot-think, plan-react, bolaa, autogpt): scripted replies
drive each through every guard under both protocols, then each strategy's own behaviour (ZST's thought, PlanReAct's
plan, BOLAA's hand-offs, AutoGPT's bounded memory) and replay from the reply cache."""

import json
import re
import typing
from types import SimpleNamespace

import pytest

from switchyard.configs.schema import DEFAULT_REACT_EXAMPLES, RouterConfig
from switchyard.evaluation.jsonl import read_results
from switchyard.evaluation.rows import RESULTS
from switchyard.llm.backend import Reply
from switchyard.llm.cache import CachingBackend, ReplyStore
from switchyard.llm.client import LLM
from switchyard.llm.prompts import PLAN_REACT_EXAMPLES
from switchyard.nodes.strategies import STRATEGIES
from switchyard.nodes.strategies.autogpt import memory_tokens, remember
from switchyard.nodes.strategies.bolaa import LABOR
from tests.conftest import ROOT
from tests.nodes.scripted import scripted_llm

NEW = ("zeroshot-think", "plan-react", "bolaa", "autogpt")
CASES = [(s, p) for s in NEW for p in ("json", "tools")]
PLAN = '{"steps": ["retrieve", "rerank", "grade", "answer"]}'
GARBAGE = "I would like to search, please!"
COUPLER = "The Janney coupler was patented by Eli Janney in 1873 [1]."
FLAGS = "Blue flags protect workers on a track [1]."


def _call(action: str, thought: str = "", **args) -> Reply:
    return Reply(thought, tool_calls=[{"name": action, "arguments": json.dumps(args)}])


def encode(strategy: str, protocol: str, action: str, **args):
    """The reply making `strategy` propose `action` (bolaa: its labor agent's reply)."""
    if strategy == "autogpt" and protocol == "json":
        return json.dumps(
            {
                "reasoning": f"do {action}",
                "plan": "search, then answer",
                "criticism": "be brief",
                "remember": args.pop("remember", ""),
                "command": action,
                **args,
            }
        )
    if protocol == "tools":
        return _call(action, f"do {action}", **args)
    return json.dumps({"thought": f"do {action}", "action": action, **args})


def _agent(action: str) -> str:
    return next(agent for agent, actions in LABOR.items() if action in actions)


def handoff(protocol: str, agent: str, message: str):
    return json.dumps({"agent": agent, "message": message}) if protocol == "json" else _call(agent, message=message)


def script(strategy: str, protocol: str, decisions) -> dict:
    """scripted_llm arguments making `strategy` propose `decisions`: a list of (action, args) (the last repeats),
    a function of the call number, or GARBAGE (every decision reply unparseable)."""
    kw = {"planner": PLAN}
    if decisions == GARBAGE:
        reply = GARBAGE if protocol == "json" else Reply(GARBAGE)
        return {**kw, ("controller" if strategy == "bolaa" else "router"): reply}
    if callable(decisions):  # bolaa: every step goes to the agent of the first one
        agent = _agent(decisions(1)[0])
        if strategy != "bolaa":
            return {**kw, "router": lambda n: encode(strategy, protocol, decisions(n)[0], **decisions(n)[1])}
        return {
            **kw,
            "controller": handoff(protocol, agent, f"go on, {agent}"),
            "searcher" if agent == "search" else "answerer": lambda n: encode(
                strategy, protocol, decisions(n)[0], **decisions(n)[1]
            ),
        }
    replies = [encode(strategy, protocol, a, **dict(args)) for a, args in decisions]
    if strategy != "bolaa":
        return {**kw, "router": replies}
    agents = [_agent(a) for a, _ in decisions]
    return {
        **kw,
        "controller": [handoff(protocol, g, f"please {a}") for g, (a, _) in zip(agents, decisions)],
        "searcher": [r for g, r in zip(agents, replies) if g == "search"] or None,
        "answerer": [r for g, r in zip(agents, replies) if g == "answer"] or None,
    }


def run(make_pipeline, case, decisions, question, *overrides, **replies):
    strategy, protocol = case
    llm, backend = scripted_llm(**{**script(strategy, protocol, decisions), **replies})
    pipe = make_pipeline(
        "graph.mode=agent",
        f"graph.router.strategy={strategy}",
        f"graph.router.protocol={protocol}",
        *overrides,
        llm=llm,
    )
    return pipe.ask(question), backend


def _actions(result):
    return [s["action"] for s in result.steps]


def _guards(result):
    return [s["guard"] for s in result.steps]


def _systems(backend, start):
    return [c for c in backend.calls if c[0]["content"].startswith(start)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
class TestEveryGuard:
    def test_happy_path(self, make_pipeline, case):
        result, _ = run(
            make_pipeline,
            case,
            [("retrieve", {"query": "knuckle coupler patent"}), ("rerank", {}), ("grade", {}), ("answer", {})],
            "Who patented the knuckle coupler?",
            answer=COUPLER,
        )
        assert _actions(result) == ["retrieve", "rerank", "grade", "answer"]
        assert _guards(result) == [None] * 4 and result.failures.guards == {}
        assert result.steps[0]["args"] == {"query": "knuckle coupler patent"} and result.steps[0]["thought"]
        assert result.citations[0].title == "Railway couplers" and not result.abstained
        assert all(s["llm_calls"] >= 1 and "observation" in s for s in result.steps)

    def test_repeat_is_not_executed_again(self, make_pipeline, case):
        result, _ = run(make_pipeline, case, [("retrieve", {"query": "coupler"})], "Who patented the knuckle coupler?")
        assert _actions(result).count("retrieve") == 1
        assert _actions(result)[:4] == ["retrieve", "rerank", "grade", "answer"]
        assert _guards(result)[1:4] == ["repeat"] * 3

    def test_malformed_output_is_repaired_once_then_falls_back(self, make_pipeline, case):
        result, backend = run(
            make_pipeline,
            case,
            GARBAGE,
            "Who patented the knuckle coupler?",
            rewrite='{"query": "knuckle coupler"}',
            answer=COUPLER,
        )
        assert _actions(result) == ["rewrite", "retrieve", "rerank", "grade", "answer"]
        assert set(_guards(result)) == {"invalid"} and result.failures.parse_fallbacks == 5
        assert any(re.search("not (a )?valid", c[-1]["content"]) for c in backend.calls)  # the repair round
        assert not result.abstained

    def test_budget_forces_an_answer(self, make_pipeline, case):
        result, _ = run(
            make_pipeline,
            case,
            lambda n: ("retrieve", {"query": f"blue flags {n}"}),
            "What do blue flags protect?",
            "graph.router.max_steps=3",
            answer=FLAGS,
        )
        assert _actions(result) == ["retrieve", "retrieve", "retrieve", "answer"]
        assert _guards(result)[-1] == "budget" and not result.abstained and result.citations

    def test_budget_without_passages_abstains(self, make_pipeline, case):
        result, _ = run(
            make_pipeline,
            case,
            lambda n: ("rewrite", {"query": f"blue flag variant {n}"}),
            "What do blue flags protect?",
            "graph.router.max_steps=2",
        )
        assert _actions(result) == ["rewrite", "rewrite", "abstain"] and _guards(result)[-1] == "budget"
        assert result.abstained

    def test_premature_answer_is_refused(self, make_pipeline, case):
        result, _ = run(
            make_pipeline,
            case,
            [("answer", {}), ("retrieve", {"query": "gauge"}), ("rerank", {}), ("grade", {}), ("answer", {})],
            "What is standard gauge?",
            rewrite='{"query": "standard gauge"}',
            answer="Standard gauge is 1,435 mm [1].",
        )
        assert result.steps[0]["action"] == "rewrite" and result.steps[0]["guard"] == "premature_answer"
        assert _actions(result)[-1] == "answer" and not result.abstained

    def test_ungrounded_query_is_dropped(self, make_pipeline, case):
        result, _ = run(
            make_pipeline,
            case,
            [("retrieve", {"query": "only for rewrite/retrieve"}), ("rerank", {}), ("grade", {}), ("answer", {})],
            "What do blue flags protect?",
            answer=FLAGS,
        )
        first = result.steps[0]
        assert first["guard"] == "ungrounded_query" and first["args"] == {"query": "What do blue flags protect?"}
        assert not result.abstained


HAPPY = [("retrieve", {"query": "knuckle coupler patent"}), ("rerank", {}), ("grade", {}), ("answer", {})]


class TestZeroshotThink:
    @pytest.mark.parametrize("protocol", ["json", "tools"])
    def test_a_free_text_thought_precedes_each_action(self, make_pipeline, protocol):
        result, backend = run(
            make_pipeline,
            ("zeroshot-think", protocol),
            HAPPY,
            "Who patented the knuckle coupler?",
            think="First I search for the coupler.",
            answer=COUPLER,
        )
        assert [s["thought"] for s in result.steps] == ["First I search for the coupler."] * 4
        assert all(s["llm_calls"] == 2 for s in result.steps)  # the thought, then the action
        thinking = [t for c, t in zip(backend.calls, backend.tools) if "Do not act yet" in c[0]["content"]]
        assert len(thinking) == 4 and all(t == (None, None) for t in thinking)  # free text: no tools
        deciding = [c for c in _systems(backend, "You control") if "Do not act yet" not in c[0]["content"]]
        assert all(c[-1]["content"].endswith("Your thought: First I search for the coupler.") for c in deciding)
        assert all("Examples:" not in m["content"] for c in deciding for m in c)


class TestPlanReact:
    def test_plans_once_then_acts_with_the_plan_in_view(self, make_pipeline):
        result, backend = run(
            make_pipeline, ("plan-react", "json"), HAPPY, "Who patented the knuckle coupler?", answer=COUPLER
        )
        assert _actions(result) == ["retrieve", "rerank", "grade", "answer"]
        assert len([c for c in backend.calls if "Write the plan" in c[0]["content"]]) == 1
        assert [s["plan"] for s in result.steps] == [
            ["retrieve", "rerank", "grade", "answer"],
            ["rerank", "grade", "answer"],
            ["grade", "answer"],
            ["answer"],
        ]
        deciding = [c for c in _systems(backend, "You control") if "Write the plan" not in c[0]["content"]]
        assert "Plan (remaining): retrieve, rerank, grade, answer" in deciding[0][-1]["content"]
        assert "Examples:" in deciding[0][1]["content"] and "Spain" in deciding[0][1]["content"]
        assert "Earlier steps:" in deciding[-1][-1]["content"]

    def test_replans_after_grading_finds_nothing(self, make_pipeline):
        result, backend = run(
            make_pipeline,
            ("plan-react", "json"),
            HAPPY[:3]
            + [
                ("rewrite", {"query": "coupler patent"}),
                ("retrieve", {}),
                ("rerank", {}),
                ("grade", {}),
                ("answer", {}),
            ],
            "Who patented the knuckle coupler?",
            "grade.method=llm",
            grade=['{"relevant": false}'] * 5 + ['{"relevant": true}'],
            answer=COUPLER,
        )
        assert _actions(result)[:4] == ["retrieve", "rerank", "grade", "rewrite"]
        assert len([c for c in backend.calls if "Write the plan" in c[0]["content"]]) == 2

    def test_a_guard_override_replans(self, make_pipeline):
        result, backend = run(
            make_pipeline,
            ("plan-react", "json"),
            [("answer", {})] + HAPPY,
            "Who patented the knuckle coupler?",
            rewrite='{"query": "knuckle coupler"}',
        )
        assert result.steps[0]["guard"] == "premature_answer"
        assert len([c for c in backend.calls if "Write the plan" in c[0]["content"]]) == 2


class TestBolaa:
    @pytest.mark.parametrize("protocol", ["json", "tools"])
    def test_controller_hands_each_step_to_a_labor_agent(self, make_pipeline, protocol):
        result, backend = run(
            make_pipeline, ("bolaa", protocol), HAPPY, "Who patented the knuckle coupler?", answer=COUPLER
        )
        assert [(s["agent"], s["message"], s["action"]) for s in result.steps] == [
            ("search", "please retrieve", "retrieve"),
            ("search", "please rerank", "rerank"),
            ("search", "please grade", "grade"),
            ("answer", "please answer", "answer"),
        ]
        assert all(s["llm_calls"] == 2 for s in result.steps)  # the controller, then the agent
        controller = _systems(backend, "You coordinate")
        assert "Earlier hand-offs" not in controller[0][-1]["content"]
        assert "search <- please retrieve\n  did retrieve: " in controller[1][-1]["content"]
        searcher = _systems(backend, "You are the search agent")
        assert searcher[0][-1]["content"].endswith("Message from the controller: please retrieve")
        assert "Your earlier steps:" in searcher[1][-1]["content"]
        [answerer] = _systems(backend, "You are the answer agent")
        assert "Message from the controller: please answer" in answerer[-1]["content"]
        assert "Janney" in answerer[-1]["content"]  # the passages search kept, its own context
        if protocol == "tools":
            offered = {
                c[0]["content"][:20]: [t["function"]["name"] for t in tools]
                for c, (tools, _) in zip(backend.calls, backend.tools)
                if tools
            }
            assert offered == {
                "You coordinate two a": ["search", "answer"],
                "You are the search a": ["rewrite", "retrieve", "rerank", "grade"],
                "You are the answer a": ["answer", "abstain"],
            }

    @pytest.mark.parametrize("protocol", ["json", "tools"])
    def test_an_agent_acting_outside_its_role_is_repaired_then_invalid(self, make_pipeline, protocol):
        llm, backend = scripted_llm(
            controller=handoff(protocol, "search", "find it"),
            searcher=encode("bolaa", protocol, "answer"),
            rewrite='{"query": "coupler"}',
        )
        result = make_pipeline(
            "graph.mode=agent",
            "graph.router.strategy=bolaa",
            f"graph.router.protocol={protocol}",
            "graph.router.max_steps=2",
            llm=llm,
        ).ask("Who patented the knuckle coupler?")
        assert _guards(result)[:2] == ["invalid", "invalid"] and _actions(result)[:2] == ["rewrite", "retrieve"]
        assert all(s["agent"] == "search" for s in result.steps[:2])
        assert len(_systems(backend, "You are the search agent")) == 4  # each step: the call and its repair

    def test_controller_reply_is_recorded_even_when_invalid(self, make_pipeline):
        result, _ = run(
            make_pipeline, ("bolaa", "json"), GARBAGE, "Who patented the knuckle coupler?", "graph.router.max_steps=1"
        )
        assert result.steps[0]["agent"] is None and result.steps[0]["guard"] == "invalid"


def _fact(n: int) -> str:
    return f"fact {n}: the knuckle coupler passage names Eli Janney as the patent holder in 1873 " + "x" * 20


class TestAutoGPT:
    @pytest.mark.parametrize("protocol", ["json", "tools"])
    def test_memory_is_bounded_and_summarised_when_full(self, make_pipeline, protocol):
        decisions = [
            ("retrieve", {"query": "knuckle coupler patent", "remember": _fact(1)}),
            ("rerank", {"remember": _fact(2)}),
            ("grade", {"remember": _fact(3)}),
            ("answer", {}),
        ]
        result, backend = run(
            make_pipeline,
            ("autogpt", protocol),
            decisions,
            "Who patented the knuckle coupler?",
            "graph.router.memory_tokens=64",
            summary="Janney patented the coupler in 1873.",
            answer=COUPLER,
        )
        assert _actions(result) == ["retrieve", "rerank", "grade", "answer"]
        memories = [s["memory"] for s in result.steps]
        assert memories[:2] == [[_fact(1)], [_fact(1), _fact(2)]]
        assert memories[2:] == [["Janney patented the coupler in 1873."]] * 2
        assert [s["memory_summarised"] for s in result.steps] == [False, False, True, False]
        assert all(memory_tokens(m) <= 64 for m in memories)
        [summarise] = _systems(backend, "Merge these notes")
        assert summarise[-1]["content"] == "\n".join(f"- {_fact(n)}" for n in (1, 2, 3))
        last = _systems(backend, "You are an autonomous agent")[-1]
        assert "Memory:\n- Janney patented the coupler in 1873." in last[-1]["content"]
        assert "Last observation: verdict correct" in last[-1]["content"]
        if protocol == "json":
            assert result.steps[0]["thoughts"] == {
                "reasoning": "do retrieve",
                "plan": "search, then answer",
                "criticism": "be brief",
            }
        else:
            assert result.steps[0]["thoughts"]["reasoning"] == "do retrieve"
            tools = next(t for t, _ in backend.tools if t)
            assert all("remember" in t["function"]["parameters"]["properties"] for t in tools)

    def _res(self, summary: str, limit: int = 64):
        llm, backend = scripted_llm(summary=summary)
        router = SimpleNamespace(memory_tokens=limit)
        return SimpleNamespace(config=SimpleNamespace(graph=SimpleNamespace(router=router)), llm=llm), backend

    def test_a_long_summary_is_clipped_to_the_bound(self):
        res, _ = self._res("word " * 400)
        memory, summarised = remember([_fact(1), _fact(2)], _fact(3), res, None)
        assert summarised and len(memory) == 1 and memory_tokens(memory) == 64

    def test_no_summary_keeps_the_newest_facts_that_fit(self):
        res, _ = self._res("")
        memory, summarised = remember([_fact(1), _fact(2)], _fact(3), res, None)
        assert summarised and memory == [_fact(2), _fact(3)] and memory_tokens(memory) <= 64

    def test_known_or_empty_facts_are_not_added(self):
        res, backend = self._res("x")
        assert remember([_fact(1)], f"  {_fact(1)} ", res, None) == ([_fact(1)], False)
        assert remember([_fact(1)], "", res, None) == ([_fact(1)], False)
        assert backend.calls == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_replays_from_the_reply_cache(make_pipeline, case, tmp_path):
    strategy, protocol = case
    decisions = [
        ("retrieve", {"query": "knuckle coupler patent", "remember": _fact(1)}),
        ("rerank", {}),
        ("grade", {}),
        ("answer", {}),
    ]
    llm, backend = scripted_llm(**script(strategy, protocol, decisions), answer=COUPLER)
    identity = {"backend": "scripted", "model": "script"}
    overrides = ("graph.mode=agent", f"graph.router.strategy={strategy}", f"graph.router.protocol={protocol}")

    def ask(inner):
        llm = LLM(CachingBackend(inner, ReplyStore(tmp_path), identity), max_retries=0)
        result = make_pipeline(*overrides, llm=llm).ask("Who patented the knuckle coupler?")
        return [{k: v for k, v in s.items() if not k.endswith("_ms")} for s in result.steps], result.answer

    recorded = ask(backend)
    assert ask(None) == recorded and recorded[0][-1]["action"] == "answer"


def test_every_strategy_is_configurable_and_has_a_config():
    strategies = typing.get_args(RouterConfig.model_fields["strategy"].annotation)
    assert set(strategies) == set(STRATEGIES)
    from switchyard.configs.loader import CONFIG_DIR, load_config

    shipped = {load_config(p).graph.router.strategy for p in CONFIG_DIR.glob("agent*.yaml")}
    assert shipped == set(STRATEGIES)


def test_the_memory_bound_enters_the_config_hash_only_when_set():
    from switchyard.configs.loader import config_hash, config_to_dict, load_config

    default, autogpt = load_config(None, ["graph.mode=agent"]), load_config("agent-autogpt")
    assert "memory_tokens" not in config_to_dict(default)["graph"]["router"]  # hashes made before stay
    assert "memory_tokens" not in config_to_dict(autogpt)["graph"]["router"]
    wider = load_config("agent-autogpt", ["graph.router.memory_tokens=400"])
    assert config_to_dict(wider)["graph"]["router"]["memory_tokens"] == 400
    assert config_hash(wider) != config_hash(autogpt)


def test_few_shot_examples_never_come_from_an_evaluation_set():
    examples = re.findall(r"^Question: (.+)$", "\n".join(DEFAULT_REACT_EXAMPLES) + "\n" + PLAN_REACT_EXAMPLES, re.M)
    assert len(examples) == 2
    evaluated = set(re.findall(r'^\s+"(.+\?)",$', (ROOT / "bench" / "common.py").read_text(), re.M))  # SAMPLE_QUESTIONS
    assert "What is standard gauge?" in evaluated
    runs = {path.parent for path in ROOT.glob("bench/eval/*/questions.jsonl*")}
    assert len(runs) >= 10  # the committed runs' rows, packed (questions.jsonl.xz) or not
    for path in [
        *(run / RESULTS for run in runs),
        *ROOT.glob("tests/fixtures/*/questions.jsonl"),
        *ROOT.glob("tests/fixtures/*/queries.jsonl"),
    ]:
        for row in read_results(path):
            evaluated.add(row.get("question") or row.get("text"))
    normal = {" ".join(str(q).lower().split()) for q in evaluated}
    assert not {" ".join(q.lower().split()) for q in examples} & normal
    # the plan-react example is answered by the sample corpus
    assert "Spain's high-speed network uses standard gauge" in " ".join(
        (ROOT / "samples" / "corpus" / "track-gauge.txt").read_text().split()
    )
