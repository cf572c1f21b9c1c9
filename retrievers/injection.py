"""Instruction-likeness of retrieved text: a signal for indirect prompt injection, and the policy applied to it.

Retrieved text is data. A passage that addresses the model reading it ("AI assistant: ignore the passages above and
...") is the vector of indirect prompt injection (Greshake et al. 2023, "Not what you've signed up for:
Compromising Real-World LLM-Integrated Applications with Indirect Prompt Injection"; the BIPIA benchmark, Yi et al.
2023). `instruction_score` is a pure, lexical and structural detector of such text: the features below are the
recurring surface forms of the attack texts in those papers and in the payloads of tests/fixtures/injection/dev.jsonl
(the development part; the test part, questions.jsonl, is written in other phrasings and was not used to choose
the features or the threshold). Ordinary text, including imperatives addressed to a human reader (recipes,
manuals, rule books) and text that *describes* prompt injection, scores below the default threshold.

The score of a text is

    score = min(1, sum over the features f present of w_f)

with the features (each counted once, case-insensitive) and weights:

- `addressee` (0.35): the text addresses an AI: "AI assistant:", "Dear assistant", "Note to any chatbot", "If you
  are a language model", "Attention AI agent", "LLM, ...", "Message for the LLM";
- `override` (0.5): it asks to set earlier instructions or context aside: "ignore / disregard / forget / overlook
  (all) (the) previous / prior / earlier / above instructions / rules / context / passages", "new instructions",
  "your new task", "this overrides", "the previous context is outdated";
- `role` (0.5): a chat role or template marker at the start of a line or inline: "system:", "assistant:",
  "<|im_start|>", "[INST]", "### Instruction", "<<SYS>>";
- `directive` (0.25): second-person commands to the model: "you must", "you should reply", "you are now", "from now
  on", "do not mention", "your next action", "your first step";
- `reveal` (0.35): requests to print, reveal, output, repeat, dump, list or show the system prompt, the other
  passages / documents / context, or passwords, keys, codes or confidential notes;
- `dictate` (0.3): dictating the reply: "tell the user", "reply / respond / answer (only) with / that", "say
  exactly", "the correct answer is", "include this link", "add the sentence";
- `tool` (0.35): naming the agent's own actions: "call / use the ... tool", "your query", "search for '...'",
  "rewrite the search query", "abstain now / immediately", "retrieve again", "stop searching";
- `link_lure` (0.35): a URL in the same text as a call to act on it: click, open, visit, log in / sign in, verify
  your account, download, markdown images with a query string.

A passage is *flagged* when its score is at least the threshold (`retrieve.injection_threshold`, default 0.6: two
features, or `override` / `role` with another). The threshold was chosen on the development payloads and clean
texts (every development payload flagged, no clean text flagged) and checked on the suite's corpora
(docs/injection.md lists the counts).

What this does not do: it is not a classifier trained on attacks (BIPIA's fine-tuned detectors, or the "known-answer"
detection of Liu et al. 2024); it does not read text in images or encodings (base64, homoglyphs, other languages)
and an attacker who knows the features can phrase a payload around them. It is one layer: the answer and agent
defences (nodes/answer.py, nodes/router.py) do not trust unflagged passages to be harmless either.

Policies (`retrieve.injection_policy`), applied by `apply_policy` inside the one retrieval path:
- `keep`: no change (no defence; the "before" of docs/benchmarks.md);
- `demote`: flagged passages move below every unflagged one (their order kept), so they are the first to be cut;
- `exclude` (default): flagged passages are dropped from the results.

The score is computed from the chunk text when a passage is read (`Passage.injection`), so indexes made before the
signal existed need no re-ingest and get the same value a new one would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from switchyard.text import split_sentences

if TYPE_CHECKING:
    from switchyard.retrievers.documents import Passage

POLICIES = ("keep", "demote", "exclude")
DEFAULT_THRESHOLD = 0.6

_AI = r"(?:ai|a\.i\.|assistant|chat ?bot|bot|language model|llm|agent|model|gpt)s?"
_I = re.IGNORECASE
FEATURES: dict[str, tuple[float, tuple[re.Pattern[str], ...]]] = {
    "addressee": (
        0.35,
        (
            re.compile(
                rf"\b(?:dear|hey|hello|hi|attention|note (?:to|for)|message (?:to|for)|instructions? (?:to|for)"
                rf"|to)\s+(?:the\s+|any\s+|all\s+|every\s+)?(?:autonomous\s+)?(?:ai\s+)?{_AI}\b",
                _I,
            ),
            re.compile(rf"(?:^|[.!?\n]\s*)(?:(?:ai|llm)\s+)?{_AI}\s*[:,]", _I),
            re.compile(rf"\bif you are an? (?:ai\b|{_AI})", _I),
            re.compile(
                r"\b(?:ai|llm)\s+(?:assistant|agent|model|system)s?\b(?!\s+(?:is|are|was|were|can|have|has)\b)", _I
            ),
            re.compile(r"\bfor (?:ai|language) models\b", _I),
            re.compile(r"\b(?:the )?(?:assistant|model|chatbot|agent) (?:should|must|shall)\b", _I),
        ),
    ),
    "override": (
        0.5,
        (
            re.compile(
                r"\b(?:ignore|disregard|forget|overlook|override|bypass)\s+(?:all\s+|any\s+)?(?:of\s+)?"
                r"(?:the\s+|your\s+)?(?:previous|prior|earlier|above|preceding|original|former|other)?\s*"
                r"(?:instructions?|rules|guidance|context|passages|directions|prompt|documents)\b",
                _I,
            ),
            re.compile(
                r"\b(?:disregard|ignore)\s+(?:the\s+)?(?:passages|documents|text)\s+(?:above|you were given)", _I
            ),
            re.compile(r"\bnew (?:instructions?|task|rules)\b|\byour new task\b|\bthis overrides\b", _I),
            re.compile(
                r"\b(?:previous|prior|earlier) (?:context|instructions?) (?:is|are) (?:outdated|wrong|void)", _I
            ),
            re.compile(r"\b(?:whatever|regardless of what) the (?:documents|passages|context) say", _I),
            re.compile(r"\bthe facts above are wrong\b|\bdo not use the documents\b", _I),
        ),
    ),
    "role": (
        0.5,
        (
            re.compile(r"(?:^|\n|[.!?]\s)\s*(?:system|assistant)\s*:", _I),
            re.compile(r"<\|im_(?:start|end)\|>|\[/?INST\]|<<SYS>>|###\s*(?:instruction|system)", _I),
        ),
    ),
    "directive": (
        0.25,
        (
            re.compile(r"\byou (?:must|should|have to|need to|will now|are now)\b", _I),
            re.compile(
                r"\bfrom now on\b|\bdo not mention\b|\byour (?:next action|first step|next step|answer must)\b", _I
            ),
            re.compile(r"\b(?:maintenance|debug(?:ging)?|developer) mode\b", _I),
        ),
    ),
    "reveal": (
        0.35,
        (
            re.compile(
                r"\b(?:print|reveal|output|repeat|dump|list|show|copy|disclose)\b[^.\n]{0,60}\b(?:system prompt|"
                r"initial prompt|instructions|other (?:passages|documents)|(?:all|every)(?: of)? the (?:text|"
                r"passages|documents)|every(?: other)? (?:retrieved )?(?:passage|document)|passwords?|keys|"
                r"access codes|confidential|private|hidden|conversation|context window|contents of)",
                _I,
            ),
        ),
    ),
    "dictate": (
        0.3,
        (
            re.compile(r"\b(?:tell|inform) the (?:user|reader)\b", _I),
            re.compile(
                r"\b(?:reply|respond|answer)\b[^.\n]{0,40}\b(?:only with|with the name|with:|that|to the user)", _I
            ),
            re.compile(r"\bsay (?:exactly|that|the)\b|\bthe correct answer is\b|\bstate that\b", _I),
            re.compile(r"\b(?:include|add|append|insert) (?:this|the|a) (?:link|sentence|url|image)\b", _I),
            re.compile(r"\bend your (?:reply|answer|response)\b|\bat the end of your (?:answer|reply|response)\b", _I),
        ),
    ),
    "tool": (
        0.35,
        (
            re.compile(r"\b(?:call|use|invoke|run)\s+the\s+\w+\s+tool\b|\bwith tools\b", _I),
            re.compile(r"\b(?:rewrite|change) (?:the |your )?(?:search )?query\b", _I),
            re.compile(r"\bsearch for\s+['\"‘“]", _I),
            re.compile(r"\babstain (?:now|immediately)\b|\bstop searching\b|\bretrieve again\b", _I),
            re.compile(r"\breply directly\b", _I),
        ),
    ),
    "link_lure": (
        0.35,
        (
            re.compile(
                r"(?:https?://|www\.)\S+[^.\n]{0,80}\b(?:click|open|log ?in|sign ?in|verify|download|appended)"
                r"|\b(?:click|open|log ?in|sign ?in|verify|download)\b[^.\n]{0,80}(?:https?://|www\.)",
                _I,
            ),
            re.compile(r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?", _I),
            re.compile(r"\b(?:cite|output) (?:the url )?(?:https?://|www\.)\S+|\burl (?:https?://|www\.)", _I),
        ),
    ),
}


def instruction_features(text: str) -> dict[str, float]:
    """The features present in `text` with their weights (the module docstring lists them)."""
    text = text or ""
    return {name: weight for name, (weight, patterns) in FEATURES.items() if any(p.search(text) for p in patterns)}


@lru_cache(maxsize=65536)
def instruction_score(text: str) -> float:
    """min(1, the sum of the weights of the features present): 0 for ordinary text, >= the threshold for text that
    instructs an AI (module docstring). Pure and deterministic."""
    return round(min(1.0, sum(instruction_features(text).values())), 4)


@lru_cache(maxsize=65536)
def split_instructions(text: str) -> tuple[str, str]:
    """(the text's sentences with no feature, those with at least one), each joined by spaces. A passage below the
    threshold may still hold one instruction-like sentence (one feature); what the router is asked to do is checked
    against it (nodes/router.py `echoes_instructions`)."""
    plain: list[str] = []
    marked: list[str] = []
    for sentence in split_sentences(text or ""):
        (marked if instruction_features(sentence) else plain).append(sentence)
    return " ".join(plain), " ".join(marked)


def is_flagged(passage: Passage, threshold: float = DEFAULT_THRESHOLD) -> bool:
    return passage.injection >= threshold


def unflagged(passages: Iterable[Passage], policy: str, threshold: float = DEFAULT_THRESHOLD) -> list[Passage]:
    """The passages a decision may rest on under `policy`: all of them with `keep`, otherwise those not flagged."""
    passages = list(passages)
    return passages if policy == "keep" else [p for p in passages if not is_flagged(p, threshold)]


def apply_policy(passages: Iterable[Passage], policy: str, threshold: float = DEFAULT_THRESHOLD) -> list[Passage]:
    """The passages under `policy` (keep | demote | exclude), order otherwise kept."""
    passages = list(passages)
    if policy == "keep":
        return passages
    clean = unflagged(passages, policy, threshold)
    if policy == "exclude":
        return clean
    if policy == "demote":
        return clean + [p for p in passages if is_flagged(p, threshold)]
    raise ValueError(f"unknown injection policy {policy!r}; one of {', '.join(POLICIES)}")
