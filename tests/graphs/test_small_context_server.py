"""Every pipeline through a real llama.cpp server (llama_cpp.server, the packaged GGUF, the function-calling chat
format) started with a 1,024-token context, with more passages than fit in it: the fixed pipeline and each agent
strategy answer or abstain, and the server refuses no prompt for its length (issue 62, goal 1)."""

import pytest

from switchyard.errors import ContextOverflowError
from tests.conftest import started_llama_server

CONTEXT = 1024
QUESTION = "Who patented the knuckle coupler?"
# (name, config file, overrides): the fixed pipeline, the seven strategies, and the tool-calling ones that overflowed
# a server's context with their own generation in the committed grids
PIPELINES = [
    ("fixed", "fixed-openai.yaml", []),
    *[
        (strategy, "agent-openai.yaml", [f"graph.router.strategy={strategy}"])
        for strategy in ("react", "zeroshot", "zeroshot-think", "plan", "plan-react", "bolaa", "autogpt")
    ],
    *[
        (f"{strategy}-tools", "agent-openai.yaml", [f"graph.router.strategy={strategy}", "graph.router.protocol=tools"])
        for strategy in ("react", "bolaa", "autogpt")
    ],
]


@pytest.fixture(scope="module")
def small_server():
    with started_llama_server(n_ctx=CONTEXT, chat_format="chatml-function-calling") as url:
        yield url


def refusals_recorded(backend) -> list[dict]:
    """Every request the server refuses for its context, as {"tools": whether the request had tools}."""
    refused: list[dict] = []
    create = backend._create

    def recording(kwargs, json_schema):
        try:
            return create(kwargs, json_schema)
        except ContextOverflowError:
            refused.append({"tools": "tools" in kwargs})
            raise

    backend._create = recording
    return refused


@pytest.mark.slow
@pytest.mark.parametrize(("name", "config", "overrides"), PIPELINES, ids=[p[0] for p in PIPELINES])
def test_every_pipeline_answers_or_abstains_in_a_small_context(make_pipeline, small_server, name, config, overrides):
    from switchyard.configs.loader import CONFIG_DIR

    pipe = make_pipeline(
        f"llm.base_url={small_server}",
        "llm.model=smollm2",
        "llm.timeout_s=600",
        f"llm.context_window={CONTEXT}",
        "rerank.top_k=8",  # up to eight chunks of the sample corpus and 600 tokens for the reply: more than 1,024
        "answer.max_passages=8",
        "answer.short_max_tokens=600",
        "graph.router.max_steps=4",
        *overrides,
        config_file=CONFIG_DIR / config,
        answer_format="short",
    )
    refused = refusals_recorded(pipe.resources.llm.backend)
    result = pipe.ask(QUESTION)
    assert result.abstained or result.answer.strip()
    # no prompt was refused for its length; only a tool call the server itself generated past its context is
    # (and then asked again as JSON)
    assert all(r["tools"] for r in refused), refused


@pytest.mark.slow
def test_without_a_configured_window_a_refused_answer_prompt_keeps_the_question(make_pipeline, small_server):
    from switchyard.configs.loader import CONFIG_DIR

    pipe = make_pipeline(
        f"llm.base_url={small_server}",
        "llm.model=smollm2",
        "llm.timeout_s=600",
        "rerank.top_k=8",
        "answer.max_passages=8",
        "answer.short_max_tokens=600",
        config_file=CONFIG_DIR / "fixed-openai.yaml",
        answer_format="short",
    )
    backend = pipe.resources.llm.backend
    sent: list[list[dict]] = []
    create = backend._create

    def recording(kwargs, json_schema):
        sent.append(kwargs["messages"])
        return create(kwargs, json_schema)

    backend._create = recording
    result = pipe.ask(QUESTION)
    assert result.abstained or result.answer.strip()
    answer_prompts = [m for m in sent if m[-1]["content"].startswith("Passages:\n")]
    assert len(answer_prompts) >= 2  # refused as too long (the server says nothing of its window), then fitted
    assert answer_prompts[-1][-1]["content"].endswith(f"\n\nQuestion: {QUESTION}")
    assert answer_prompts[-1][-1]["content"].count("\n[") < answer_prompts[0][-1]["content"].count("\n[")
