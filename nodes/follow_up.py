"""LLM-free queries for a question asked in a conversation (`conversation.method: terms`).

A follow-up ("What year was that?") leaves out what the conversation already said; most follow-ups do not ("How
many teams are in the NFL?"). Carrying the history into a question that stands alone drowns it: on MTRAG's clapnq +
fiqa dev conversations (bench/conversation_retrieval.py, follow-up and clarification turns), all user questions so
far concatenated reach recall@5 0.27 against 0.63 for the question alone, and the previous question appended 0.51.
So the step first decides whether the question refers back, and only then carries a few weighted key terms of the
recent user turns:

    refers_back(q) = content_words(q) <= max_words  or  q holds a reference word (it, they, that, those, ...)
    weight(term)   = sum over the last `turns` user turns t holding the term of decay ** age(t)   (newest: age 0)

content words are the question's lower-cased word tokens without English stop words; a term already in the question
(or shorter than 2 characters) is never carried; the `terms` heaviest (ties: the newer turn first), then up to
`answer_terms` terms of the last answer in their order, are appended to the question. With `fuse`, the question as
asked is searched too and retrieval fuses the two lists (RRF, as it fuses any round's queries), so a wrong guess
costs little. A question that does not refer back, or has no history or nothing to carry, is searched alone.

"""

from __future__ import annotations

import re
from collections.abc import Sequence

from switchyard.configs.schema import ConversationConfig
from switchyard.conversation import Message
from switchyard.retrievers.bm25 import content_tokenizer

# words by which a question points at something said before ("is it free?", "where to buy those?")
REFERENCE_WORDS = frozenset(
    "it its itself they them their theirs themselves those these that this there he him his she her hers "
    "one ones such same former latter other others else".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def refers_back(question: str, config: ConversationConfig) -> bool:
    """Whether `question` leans on the conversation: few content words (at most `max_words`), or a reference word."""
    max_words = config.max_words
    if max_words is None or len(content_tokenizer()(question)) <= max_words:
        return True
    return not REFERENCE_WORDS.isdisjoint(_WORD.findall(question.lower()))


def carried_terms(question: str, history: Sequence[Message], config: ConversationConfig) -> list[str]:
    """The key terms of the recent turns that the question lacks, heaviest first (whether or not it refers back)."""
    tok = content_tokenizer()
    have = set(tok(question))
    weights: dict[str, float] = {}
    order: dict[str, int] = {}
    users = [m.content for m in history if m.role == "user"][-config.turns :]
    for age, text in enumerate(reversed(users)):
        for term in dict.fromkeys(tok(text)):
            if term in have or len(term) < 2:
                continue
            weights[term] = weights.get(term, 0.0) + config.decay**age
            order.setdefault(term, len(order))
    ranked = sorted(weights, key=lambda t: (-weights[t], order[t]))
    terms = ranked[: config.terms]
    if config.answer_terms:
        answers = [m.content for m in history if m.role == "assistant"][-1:]
        extra = (
            [t for t in dict.fromkeys(tok(answers[0])) if t not in have and t not in terms and len(t) >= 2]
            if answers
            else []
        )
        terms += extra[: config.answer_terms]
    return terms


def follow_up_queries(question: str, history: Sequence[Message], config: ConversationConfig) -> list[str]:
    """The retrieval queries for `question` after `history`: when it refers back, the question with the carried
    terms, and with `config.fuse` the question as asked after it. No history, a question that stands alone, or
    nothing to carry: the question alone."""
    if not history or not refers_back(question, config):
        return [question]
    terms = carried_terms(question, history, config)
    if not terms:
        return [question]
    expanded = f"{question} {' '.join(terms)}"
    return [expanded, question] if config.fuse else [expanded]
