"""Questions that need no documents (tests/fixtures/no_documents): small talk and arithmetic are detected by rules
and abstained on (or replied to) without retrieval or an LLM call; out-of-scope questions are abstained on by the
corrective check; an agent with graph.router.direct_reply may reply itself, only to what the rules detect."""

import json
from pathlib import Path

import pytest

from switchyard.configs.loader import load_config
from switchyard.errors import ConfigError
from switchyard.evaluation.datasets import load_dataset
from switchyard.evaluation.rows import EvalRow
from switchyard.graphs import draw
from switchyard.graphs.build import build_graph
from switchyard.llm.backend import Reply
from switchyard.nodes.no_documents import arithmetic, classify
from tests.nodes.scripted import scripted_llm

FIXTURE = Path(__file__).parents[1] / "fixtures" / "no_documents" / "questions.jsonl"
QUESTIONS = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
DETECTED = [q for q in QUESTIONS if q["type"] in ("small_talk", "arithmetic")]
OUT_OF_SCOPE = [q for q in QUESTIONS if q["type"] == "out_of_scope"]
AGENT = ("graph.mode=agent",)
DIRECT = ("graph.mode=agent", "graph.router.direct_reply=true")


def _d(action, **kw):
    return json.dumps({"thought": f"do {action}", "action": action, **kw})


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q["id"])
def test_rules_classify_the_committed_set(q):
    kind = classify(q["question"])
    if q["type"] in ("small_talk", "arithmetic"):
        assert kind is not None and kind.type == q["type"]
        if q["type"] == "arithmetic":
            assert kind.value == q["answers"][0]
    else:  # out of scope, and questions with a greeting in front, go to the documents
        assert kind is None


def test_an_acknowledgement_asked_as_a_question_goes_to_the_documents():
    for question in ("Is it great?", "OK, and what about the gauge?", "Cool. Who built it?", "wow 1835"):
        assert classify(question) is None, question


def test_arithmetic_never_evals():
    assert arithmetic("__import__('os').system('true')") is None
    assert arithmetic("9 ** 9 ** 9") is None and arithmetic("1 / 0") is None
    assert arithmetic("What is 1990 - 5?") == "1985" and arithmetic("In 1990, who won?") is None


class TestFixedPipeline:
    @pytest.mark.parametrize("q", DETECTED, ids=lambda q: q["id"])
    def test_abstains_with_a_reason_without_retrieval_or_llm(self, make_pipeline, q):
        llm, backend = scripted_llm()
        result = make_pipeline(llm=llm).ask(q["question"])
        assert result.abstained and result.answer == "Not found in the indexed documents."
        assert "not a question about the documents" in result.citation_check["abstain_reason"]
        assert result.grounding == {"status": "abstained", "shown": "abstention", "type": q["type"]}
        assert [e.node for e in result.trace] == ["no_documents"] and result.retrieved_doc_ids == []
        assert backend.calls == [] and result.usage.llm_calls == 0

    @pytest.mark.parametrize("q", OUT_OF_SCOPE, ids=lambda q: q["id"])
    def test_out_of_scope_is_abstained_on_by_the_corrective_check(self, make_pipeline, q):
        result = make_pipeline(config_file="configs/no-llm.yaml").ask(q["question"])
        assert result.abstained and result.verdict == "incorrect"
        assert result.citation_check["abstain_reason"].startswith("no relevant passages")

    def test_reply_behaviour(self, make_pipeline):
        llm, backend = scripted_llm()
        pipeline = make_pipeline("graph.no_documents.behaviour=reply", "graph.no_documents.message=Hello!", llm=llm)
        hi, sum_ = pipeline.ask("Hi!"), pipeline.ask("What is 2 + 2?")
        assert (hi.answer, hi.abstained, sum_.answer, sum_.short_answer) == ("Hello!", False, "4", "4")
        assert sum_.grounding == {"status": "no_documents", "shown": "reply", "type": "arithmetic"}
        assert backend.calls == []

    def test_detection_off_sends_small_talk_through_the_pipeline(self, make_pipeline):
        result = make_pipeline("graph.no_documents.detect=false", config_file="configs/no-llm.yaml").ask("Hi!")
        assert result.trace[0].node == "rewrite"
        assert "no_documents" not in draw.topology(
            build_graph(load_config(overrides=["graph.no_documents.detect=false"]))
        )


class TestAgents:
    def test_without_direct_reply_small_talk_ends_before_the_router(self, make_pipeline):
        llm, backend = scripted_llm(router=_d("retrieve", query="hi"))
        result = make_pipeline(*AGENT, llm=llm).ask("Hi!")
        assert result.abstained and result.steps == [] and backend.calls == []
        assert "small talk" in result.citation_check["abstain_reason"]

    @pytest.mark.parametrize("protocol", ["json", "tools"])
    def test_direct_reply(self, make_pipeline, protocol):
        router = (
            _d("reply")
            if protocol == "json"
            else Reply("a greeting", tool_calls=[{"name": "reply", "arguments": "{}"}])
        )
        llm, backend = scripted_llm(router=router)
        result = make_pipeline(*DIRECT, f"graph.router.protocol={protocol}", llm=llm).ask("Hello there")
        assert [(s["action"], s["guard"]) for s in result.steps] == [("reply", None)]
        assert result.answer == "Hello! Ask me a question about the indexed documents." and not result.abstained
        assert result.retrieved_doc_ids == [] and len(backend.calls) == 1
        assert "Action reply" in backend.calls[0][0]["content"]
        if protocol == "tools":
            assert "reply" in [t["function"]["name"] for t in backend.tools[0][0]]

    def test_direct_reply_computes_arithmetic(self, make_pipeline):
        llm, _ = scripted_llm(router=_d("reply"))
        result = make_pipeline(*DIRECT, llm=llm).ask("What is 12 times 3?")
        assert result.answer == "36" and result.steps[0]["observation"] == "replied directly: 36"

    def test_reply_to_a_document_question_is_refused(self, make_pipeline):
        llm, _ = scripted_llm(
            router=[
                _d("reply"),
                _d("retrieve", query="knuckle coupler patent"),
                _d("rerank"),
                _d("grade"),
                _d("answer"),
            ],
            rewrite='{"query": "knuckle coupler patent"}',
            answer="The Janney coupler was patented by Eli Janney in 1873 [1].",
        )
        result = make_pipeline(*DIRECT, llm=llm).ask("Who patented the knuckle coupler?")
        assert result.steps[0]["guard"] == "needs_documents" and result.steps[0]["action"] == "rewrite"
        assert result.failures.guards["needs_documents"] == 1
        assert result.steps[-1]["action"] == "answer" and not result.abstained

    def test_small_talk_terminates_when_the_agent_keeps_searching(self, make_pipeline):
        llm, _ = scripted_llm(router=_d("retrieve", query="hello"))
        result = make_pipeline(*DIRECT, llm=llm).ask("Hello there")
        assert result.steps and result.steps[-1]["action"] in ("answer", "abstain")

    def test_graph_and_config(self):
        cfg = load_config(overrides=list(DIRECT))
        topology = draw.topology(build_graph(cfg))
        assert "edge router -?-> reply" in topology and "edge reply ---> __end__" in topology
        assert "no_documents" not in topology
        assert cfg.model_dump()["graph"]["router"]["direct_reply"] is True
        assert "direct_reply" not in load_config().model_dump()["graph"]["router"]
        assert "no_documents" not in load_config().model_dump()["graph"]
        with pytest.raises(ConfigError, match="direct_reply works with the strategies"):
            load_config(overrides=[*DIRECT, "graph.router.strategy=bolaa"])


class TestEvaluation:
    def test_loads_as_its_own_types(self, tmp_path):
        dataset = load_dataset(FIXTURE, corpus=tmp_path)
        assert {q.type for q in dataset.questions} == {"small_talk", "arithmetic", "out_of_scope", "who", "what"}

    def test_abstention_or_direct_reply_is_correct(self):
        def row(**kw):
            return EvalRow(config="c", run=0, id="x", **kw).rescored()

        assert row(type="small_talk", abstained=True).exact_match == 1.0
        assert row(type="small_talk", prediction="Hello!").exact_match == 1.0
        assert row(type="arithmetic", prediction="4", answers=["4"]).f1 == 1.0
        assert row(type="arithmetic", prediction="5", answers=["4"]).f1 == 0.0
        assert row(type="out_of_scope", prediction="Paris is sunny", retrieved_doc_ids=["d"]).contains == 0.0
