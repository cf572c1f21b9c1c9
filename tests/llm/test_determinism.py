"""Determinism at temperature 0 (issue 23): the same request gets the same reply alone (a freshly loaded model), after
other requests of other lengths in any order, and from 8 threads released by one barrier; the same for whole
questions through the default fixed pipeline; and through a real llama.cpp OpenAI-compatible server.
bench/determinism.py measures the same with more questions, and the cost."""

import pytest

from tests.together import run_together

SYSTEM = "You answer questions about railways from the passages given, in one sentence."
PASSAGE = "The knuckle coupler was patented by Eli Janney in 1873 and couples cars automatically. "


def request(question: str, passages: int) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PASSAGE * passages + f"\nQuestion: {question}"},
    ]


TARGET = request("Who patented the knuckle coupler?", 8)
# share TARGET's prefix and differ in length; and TARGET itself, after which llama-cpp-python's prefix reuse would
# evaluate only TARGET's last prompt token, whose logits then differ by ~0.6 (bench/determinism.py)
OTHERS = [request("What is a coupler?", 3), request("When was it patented?", 12), TARGET]


def local(n_threads: int = 2, max_tokens: int = 24):
    from switchyard.llm.client import LLM
    from switchyard.llm.llamacpp import LlamaCppBackend

    return LLM(LlamaCppBackend(n_threads=n_threads), max_tokens=max_tokens)


@pytest.mark.slow
def test_local_reply_is_the_same_alone_after_others_in_any_order_and_under_8_threads():
    alone = local().generate(TARGET)
    assert alone
    llm = local()
    for order in (OTHERS, OTHERS[::-1]):
        for messages in order:
            llm.generate(messages)
        assert llm.generate(TARGET) == alone
    everything = [TARGET, *OTHERS[:2]]
    alone_all = [alone, *(local().generate(m) for m in everything[1:])]  # each on a freshly loaded model
    together = run_together(8, lambda i: llm.generate(everything[i % 3]), timeout=900)
    assert together == [alone_all[i % 3] for i in range(8)]


@pytest.mark.slow
def test_local_reply_does_not_depend_on_n_threads():
    assert local(n_threads=1).generate(TARGET) == local(n_threads=2).generate(TARGET)


@pytest.mark.slow
def test_fixed_pipeline_answers_the_same_alone_in_any_order_and_under_8_threads(make_pipeline, embedder):
    from switchyard.configs.loader import CONFIG_DIR
    from switchyard.graphs.pipeline import Pipeline
    from switchyard.llm.factory import build_llm
    from switchyard.nodes.resources import SharedModels

    questions = ["Who patented the knuckle coupler?", "What is standard gauge?"]
    overrides = ("llm.max_tokens=32",)
    pipe = make_pipeline(*overrides, config_file=CONFIG_DIR / "fixed.yaml", answer_format="short")

    def fresh():  # the same index and config, a freshly loaded model: the question asked alone
        models = SharedModels()
        models.provide(pipe.config.embedding, embedder)
        models.provide(pipe.config.llm, build_llm(pipe.config.llm))
        return Pipeline(pipe.config, models)

    alone = [fresh().ask(q).answer for q in questions]
    assert [pipe.ask(q).answer for q in questions] == alone
    assert [pipe.ask(q).answer for q in questions[::-1]] == alone[::-1]
    together = run_together(8, lambda i: pipe.ask(questions[i % 2]).answer, timeout=900)
    assert together == [alone[i % 2] for i in range(8)]


@pytest.mark.parametrize("seed", [None, 7])
def test_openai_backend_sends_temperature_and_a_seed_with_every_request(seed):
    """A call without a run's seed sends llm.seed (the backend's): a server never picks one itself."""
    import json

    from switchyard.llm.client import LLM
    from switchyard.llm.openai_backend import OpenAIBackend
    from switchyard.run_context import RunContext
    from tests.canned_server import CannedServer

    reply = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Eli Janney"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2},
    }
    server = CannedServer(json.dumps(reply).encode())
    try:
        llm = LLM(OpenAIBackend(server.url, "m", seed=3), max_tokens=8)
        assert llm.generate(TARGET, run=RunContext(seed=seed)) == "Eli Janney"
        sent = json.loads(server.bodies[0])
    finally:
        server.close()
    assert (sent["temperature"], sent["seed"]) == (0.0, 3 if seed is None else seed)


@pytest.mark.slow
def test_openai_compatible_server_reply_is_the_same_alone_after_others_and_under_8_threads(llama_server):
    """The client sends temperature 0 and a seed with every request; llama.cpp's server answers the same request the
    same way whatever it served before and however many clients send at once."""
    from switchyard.llm.client import LLM
    from switchyard.llm.openai_backend import OpenAIBackend

    llm = LLM(OpenAIBackend(llama_server, "smollm2", timeout_s=300), max_tokens=24)
    alone = llm.generate(TARGET)
    assert alone
    for order in (OTHERS, OTHERS[::-1]):
        for messages in order:
            llm.generate(messages)
        assert llm.generate(TARGET) == alone
    everything = [TARGET, *OTHERS[:2]]
    expected = [llm.generate(m) for m in everything]
    assert run_together(8, lambda i: llm.generate(everything[i % 3]), timeout=900) == [
        expected[i % 3] for i in range(8)
    ]
