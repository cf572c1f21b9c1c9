"""The LLM-free history-aware step (nodes/follow_up.py): which questions carry the conversation, which terms they
carry, in what order, and the queries retrieval gets."""

from __future__ import annotations

from switchyard.configs.schema import ConversationConfig
from switchyard.conversation import Message
from switchyard.nodes.follow_up import carried_terms, follow_up_queries, refers_back


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str) -> Message:
    return Message(role="assistant", content=text)


COUPLER = [user("Who patented the knuckle coupler?"), assistant("Eli Janney patented it in 1873.")]


def test_a_follow_up_gains_the_earlier_turns_entity():
    expanded, asked = follow_up_queries("When was it adopted?", COUPLER, ConversationConfig())
    assert asked == "When was it adopted?"
    assert expanded.startswith("When was it adopted? ")
    assert {"knuckle", "coupler"} <= set(expanded.split())


def test_no_history_is_the_question_alone():
    assert follow_up_queries("When was it adopted?", [], ConversationConfig()) == ["When was it adopted?"]


def test_a_question_that_stands_alone_is_searched_alone():
    question = "How many railway gauges are used in India?"
    assert not refers_back(question, ConversationConfig())
    assert follow_up_queries(question, COUPLER, ConversationConfig()) == [question]


def test_short_or_referring_questions_refer_back():
    config = ConversationConfig()
    assert refers_back("Deductions?", config)  # one content word
    assert refers_back("Is there a minimum amount required for those?", config)  # a reference word
    assert not refers_back("What is the minimum amount required for a mutual fund?", config)


def test_terms_already_in_the_question_are_not_repeated():
    terms = carried_terms("Was the coupler patented early?", COUPLER, ConversationConfig())
    assert "coupler" not in terms and "patented" not in terms
    assert "knuckle" in terms
    assert len(terms) == len(set(terms))


def test_a_term_said_twice_is_carried_once():
    history = [user("knuckle coupler history"), assistant("..."), user("knuckle coupler inventor"), assistant("...")]
    terms = carried_terms("When was it?", history, ConversationConfig(terms=10))
    assert terms.count("knuckle") == 1 and terms.count("coupler") == 1


def test_decay_orders_newer_turns_first():
    history = [
        user("alpha beta"),
        assistant("first answer"),
        user("alpha gamma"),
        assistant("second answer"),
        user("delta"),
        assistant("third answer"),
    ]
    # no decay: alpha, in two turns, outweighs the newest turn's delta; ties (beta, gamma, delta) go newest first
    assert carried_terms("it?", history, ConversationConfig(turns=3, decay=1.0, terms=4)) == [
        "alpha",
        "delta",
        "gamma",
        "beta",
    ]
    # strong decay: the newest turn's term leads, the oldest turn's comes last
    assert carried_terms("it?", history, ConversationConfig(turns=3, decay=0.3, terms=4)) == [
        "delta",
        "alpha",
        "gamma",
        "beta",
    ]


def test_turns_and_terms_bound_what_is_carried():
    history = [user("alpha beta"), assistant("a"), user("gamma delta"), assistant("b")]
    assert carried_terms("it?", history, ConversationConfig(turns=1)) == ["gamma", "delta"]
    assert carried_terms("it?", history, ConversationConfig(turns=2, terms=3)) == ["gamma", "delta", "alpha"]


def test_fuse_adds_the_question_as_asked():
    fused = follow_up_queries("When was it adopted?", COUPLER, ConversationConfig(fuse=True))
    alone = follow_up_queries("When was it adopted?", COUPLER, ConversationConfig(fuse=False))
    assert len(fused) == 2 and fused[1] == "When was it adopted?"
    assert alone == fused[:1]


def test_answer_terms_come_from_the_last_answer_only():
    history = [
        user("Who patented the knuckle coupler?"),
        assistant("Westinghouse made brakes."),
        user("And the coupler?"),
        assistant("Eli Janney patented it."),
    ]
    without = carried_terms("When?", history, ConversationConfig(answer_terms=0))
    assert not {"eli", "janney", "westinghouse"} & set(without)
    with_answer = carried_terms("When?", history, ConversationConfig(answer_terms=2))
    assert with_answer[: len(without)] == without
    assert with_answer[len(without) :] == ["eli", "janney"]


def test_nothing_to_carry_is_the_question_alone():
    history = [user("Who patented it?"), assistant("Eli Janney.")]
    assert follow_up_queries("Who patented it?", history, ConversationConfig()) == ["Who patented it?"]
