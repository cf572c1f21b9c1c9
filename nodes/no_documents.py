"""no_documents: questions the indexed documents cannot and need not answer: small talk (greetings, thanks, goodbyes,
acknowledgements) and arithmetic. Detected by rules (no LLM, deterministic), so "Hi!" never reaches retrieval:

- small talk: every word of the question is small-talk vocabulary and one of them is a greeting, thanks, goodbye or
  acknowledgement ("Hi there!", "Thank you very much", "Good morning, how are you?", and in a conversation "OK",
  "omg.", "Got it, thanks"); a question with any other word ("Hi, who patented the coupler?") goes to the documents;
- arithmetic: the question is a numeric expression, optionally after "what is" / "calculate" and with the operators
  written as words ("What is 12 times 3?"), evaluated with `ast` restricted to numbers and + - * / ** % and
  parentheses (never `eval`).

Out-of-scope questions ("What's the weather in Paris?") are not detected here: no rule can tell them from a question
the collection answers, so they go through retrieval and the corrective check abstains when nothing relevant is
found.

`graph.no_documents.behaviour` decides what the pipeline does with a detected question: `abstain` (the default, with
the reason) or `reply` (`graph.no_documents.message` for small talk, the result for arithmetic). An agent with
`graph.router.direct_reply: true` decides itself: its `reply` action runs `reply` below, and nodes/router.py refuses
it for a question these rules do not detect.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass

from langgraph.runtime import Runtime

from switchyard.nodes.answer import abstention
from switchyard.nodes.resources import Resources
from switchyard.run_context import RunContext

_TRIGGERS = {
    "hi",
    "hello",
    "hey",
    "hiya",
    "howdy",
    "greetings",
    "yo",
    "thanks",
    "thank",
    "thx",
    "cheers",
    "bye",
    "goodbye",
    "morning",
    "afternoon",
    "evening",
}
# a chat turn that only reacts to the last answer ("OK", "omg.") asks nothing of the documents; asked ("Is it
# great?"), such a word is a question
_ACKNOWLEDGEMENTS = {
    "ok",
    "okay",
    "alright",
    "omg",
    "wow",
    "cool",
    "nice",
    "great",
    "awesome",
    "gotcha",
    "understood",
    "hmm",
    "lol",
}
_FILLER = {
    "there",
    "good",
    "day",
    "how",
    "are",
    "you",
    "doing",
    "is",
    "it",
    "going",
    "very",
    "much",
    "a",
    "lot",
    "so",
    "again",
    "for",
    "your",
    "the",
    "help",
    "to",
    "meet",
    "see",
    "later",
    "all",
    "everyone",
    "guys",
    "friend",
    "bot",
    "and",
    "i",
    "am",
    "fine",
    "well",
    "what's",
    "up",
    "whats",
    "oh",
    "please",
    "many",
    "got",
    "that",
    "makes",
    "sense",
}
_SMALL_TALK_PHRASES = {"how are you", "how are you doing", "what's up", "whats up", "how is it going"}

_OPERATOR_WORDS = (
    ("multiplied by", "*"),
    ("divided by", "/"),
    ("to the power of", "**"),
    ("plus", "+"),
    ("minus", "-"),
    ("times", "*"),
    ("over", "/"),
    ("×", "*"),
    ("÷", "/"),
    ("^", "**"),
)
_ARITHMETIC_PREFIX = re.compile(r"^(?:what(?:'s| is)|how much is|calculate|compute|evaluate|solve)\s+", re.I)
_EXPRESSION = re.compile(r"^[\d\s.+\-*/%()]+$")
_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_MAX_EXPONENT = 100  # 9 ** 9 ** 9 would take the process down


@dataclass(frozen=True)
class NoDocuments:
    """A question that needs no documents: its type (small_talk, arithmetic), why, and the direct reply's value."""

    type: str
    reason: str
    value: str = ""


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > _MAX_EXPONENT or abs(left) > 10**6):
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)
    raise ValueError(f"not arithmetic: {type(node).__name__}")


def arithmetic(text: str) -> str | None:
    """The value of `text` when it is an arithmetic expression (as a question or not), else None."""
    expression = _ARITHMETIC_PREFIX.sub("", text.strip()).rstrip(" ?=!.").lower()
    for word, symbol in _OPERATOR_WORDS:
        expression = expression.replace(word, f" {symbol} ")
    if not _EXPRESSION.match(expression) or not re.search(r"\d\s*(\*\*|[+\-*/%])\s*[\d(.+-]", expression):
        return None
    try:
        value = _evaluate(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    if isinstance(value, float):
        value = int(value) if value.is_integer() else round(value, 10)
    return str(value)


def is_small_talk(text: str) -> bool:
    words = re.findall(r"[a-z']+", text.lower())
    if " ".join(words) in _SMALL_TALK_PHRASES:
        return True
    triggers = _TRIGGERS if "?" in text else _TRIGGERS | _ACKNOWLEDGEMENTS
    return (
        bool(words)
        and any(w in triggers for w in words)
        and all(w in _TRIGGERS | _ACKNOWLEDGEMENTS | _FILLER for w in words)
        and not re.search(r"\d", text)
    )


def classify(question: str) -> NoDocuments | None:
    """What kind of question needing no documents this is, or None: it goes to the documents."""
    if is_small_talk(question):
        return NoDocuments(
            "small_talk",
            "small talk (a greeting, thanks, goodbye or acknowledgement), not a question about the documents",
        )
    value = arithmetic(question)
    if value is not None:
        return NoDocuments("arithmetic", f"arithmetic, not a question about the documents ({value})", value)
    return None


def route_question(state: dict, detect: bool) -> str:
    """The conditional edge from START: `no_documents` for a question the rules detect, else `documents`."""
    return "no_documents" if detect and classify(state["question"]) else "documents"


def _reply(kind: NoDocuments, message: str) -> dict:
    text = kind.value or message
    return {
        "answer": text,
        "short_answer": text,
        "evidence": "",
        "abstained": False,
        "citations": [],
        "citation_check": {},
        "grounding": {"status": "no_documents", "shown": "reply", "type": kind.type},
    }


def no_documents(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    """The configured behaviour for a detected question: abstain with the reason, or reply; no retrieval, no LLM."""
    cfg = res.config.graph.no_documents
    kind = classify(state["question"])
    if kind is None:  # reached only through a wiring error: abstaining is the safe answer
        kind = NoDocuments("unknown", "no documents were searched")
    if cfg.behaviour == "reply":
        return _reply(kind, cfg.message)
    return abstention(
        res.config.answer.abstain_message,
        kind.reason,
        grounding={"status": "abstained", "shown": "abstention", "type": kind.type},
    )


def reply(state: dict, runtime: Runtime[RunContext], res: Resources) -> dict:
    """The agent's `reply` action (graph.router.direct_reply): a direct answer without retrieval. The router only
    lets it through for a question `classify` detects."""
    kind = classify(state["question"]) or NoDocuments("unknown", "")
    return _reply(kind, res.config.graph.no_documents.message)
