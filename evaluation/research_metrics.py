"""The research's answer metrics beside EM / F1 / contains / faithfulness (`switchyard eval --metrics ...`).

- `answer_similarity` (the AutoGPT IR thesis's score): cosine of the answer's and the gold answer's embeddings with
  the embedded sentence model, the best gold alternative (a list answer's items joined as one text), clipped at 0.
  No LLM. An abstention, an empty answer or a failed question scores 0 (no answer is no similarity, as EM and F1
  score it); questions that need no documents (NO_DOCUMENTS_TYPES) or have no gold answer are None.
- `answer_relevance` (RAGAS, Es et al. 2023): the judge writes `n` questions the answer answers; the score is the
  mean cosine of their embeddings with the asked question's (clipped at 0). An abstention scores 0 (RAGAS scores a
  noncommittal answer 0) and costs no call; a reply that stays unparseable (or has no question) leaves it None.
- `context_relevance` (RAGAS's context relevancy): per passage the answer cites (the passages a row stores), the
  judge names the sentences needed to answer the question; the score is relevant / all sentences of the judged
  passages. None without cited passages (abstentions, closed-book); an unparseable passage is left out.

What each cannot see (docs/evaluation.md): similarity rewards a fluent paraphrase of a wrong answer and punishes
a right answer worded far from the gold; answer relevance ignores factuality (a confident wrong answer on topic
scores high, as the Chalmers thesis notes); context relevance sees only cited passages, not uncited retrieved ones.

The judged metrics share faithfulness's pass (`faithfulness.judge_rows`): one file per metric beside
`questions.jsonl` (`judgements-answer_relevance.jsonl`, `judgements-context_relevance.jsonl`), keyed by (config,
run, question, judge), resumable; answers are never rewritten. Similarity is recomputed from the rows every time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from switchyard.evaluation.faithfulness import judge_rows
from switchyard.evaluation.metrics import NO_DOCUMENTS_TYPES
from switchyard.evaluation.rows import EvalRow
from switchyard.llm.client import LLM
from switchyard.llm.prompts import JUDGE_ANSWER_QUESTIONS, JUDGE_CONTEXT_SENTENCES
from switchyard.run_context import RunContext
from switchyard.text import split_sentences, strip_citations

Embed = Callable[[list[str]], np.ndarray]  # texts -> one vector per text (an embedder's `run`)

SIMILARITY = "answer_similarity"
JUDGED = ("answer_relevance", "context_relevance")
CHOICES = ("similarity", *JUDGED)  # what `--metrics` accepts


def judgements_file(metric: str) -> str:
    return f"judgements-{metric}.jsonl"


def _cosines(embed: Embed, texts: list[str]) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(texts))
    if not unique:
        return {}
    vectors = np.asarray(embed(unique), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    return dict(zip(unique, vectors))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return max(0.0, min(1.0, float(a @ b)))


def _references(row: EvalRow) -> list[str]:
    golds = [str(g).strip() for g in row.answers if str(g).strip()]
    return [", ".join(golds)] if row.is_list and golds else golds


def similarity_scores(rows: list[EvalRow], embed: Embed) -> list[float | None]:
    """Each row's answer similarity (see the module doc), embedding every distinct text once."""
    scorable = [r for r in rows if r.type not in NO_DOCUMENTS_TYPES and _references(r)]
    texts = [t for r in scorable for t in _references(r)]
    answered = {id(r): strip_citations(r.prediction) for r in scorable if not (r.error or r.abstained)}
    vectors = _cosines(embed, texts + [t for t in answered.values() if t])
    out: list[float | None] = []
    for row in rows:
        if row.type in NO_DOCUMENTS_TYPES or not _references(row):
            out.append(None)
        elif not answered.get(id(row)):
            out.append(0.0)
        else:
            answer = vectors[answered[id(row)]]
            out.append(max(_cosine(answer, vectors[g]) for g in _references(row)))
    return out


def with_similarity(rows: list[EvalRow], embed: Embed) -> list[EvalRow]:
    return [r.model_copy(update={SIMILARITY: s}) for r, s in zip(rows, similarity_scores(rows, embed))]


class GeneratedQuestions(BaseModel):
    questions: list[str]


class RelevantSentences(BaseModel):
    relevant: list[int]


class RelevanceJudge:
    """RAGAS-style answer and context relevance of rows, judged by `llm` (named `name`: it keys the stored
    judgements) and embedded by `embed`. Cost per answered row: answer relevance 1 judge call (+1 repair round
    when the reply does not parse) and n + 1 embeddings; context relevance 1 call per cited passage."""

    def __init__(
        self,
        llm: LLM,
        name: str,
        embed: Embed,
        questions: int = 3,
        max_passage_chars: int = 1500,
        max_tokens: int = 160,
    ):
        if not name:
            raise ValueError("the judge needs a name (it keys the stored judgements)")
        if questions < 1 or max_passage_chars < 100 or max_tokens < 16:
            raise ValueError("questions >= 1, max_passage_chars >= 100 and max_tokens >= 16")
        self.llm, self.name, self.embed = llm, name, embed
        self.questions, self.max_passage_chars, self.max_tokens = questions, max_passage_chars, max_tokens

    def answer_relevance(self, question: str, answer: str) -> dict:
        run = RunContext()
        with run.metered() as spent:
            result = self.llm.structured(
                [
                    {"role": "system", "content": JUDGE_ANSWER_QUESTIONS.format(n=self.questions)},
                    {"role": "user", "content": f"Answer: {answer[: self.max_passage_chars]}"},
                ],
                GeneratedQuestions,
                fallback=GeneratedQuestions(questions=[]),
                max_tokens=self.max_tokens,
                run=run,
            )
        generated = [q.strip() for q in result.value.questions if q.strip()][: self.questions]
        score = None
        if generated:
            vectors = _cosines(self.embed, [question, *generated])
            score = sum(_cosine(vectors[question], vectors[q]) for q in generated) / len(generated)
        return {
            "answer_relevance": score,
            "generated_questions": generated,
            "judge_fallbacks": int(score is None),
            "judge_calls": spent.llm_calls,
        }

    def context_relevance(self, question: str, passages: list[dict]) -> dict:
        run = RunContext()
        relevant = total = fallbacks = 0
        per_passage = []
        with run.metered() as spent:
            for passage in passages:
                sentences = split_sentences(" ".join(str(passage.get("text", ""))[: self.max_passage_chars].split()))
                if not sentences:
                    continue
                numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences, 1))
                result = self.llm.structured(
                    [
                        {"role": "system", "content": JUDGE_CONTEXT_SENTENCES},
                        {"role": "user", "content": f"Question: {question}\nSentences:\n{numbered}"},
                    ],
                    RelevantSentences,
                    fallback=RelevantSentences(relevant=[]),
                    max_tokens=self.max_tokens,
                    run=run,
                )
                if result.status == "fallback":
                    fallbacks += 1
                    per_passage.append({"n": passage.get("n"), "sentences": len(sentences), "relevant": None})
                    continue
                chosen = sorted({i for i in result.value.relevant if 1 <= i <= len(sentences)})
                relevant, total = relevant + len(chosen), total + len(sentences)
                per_passage.append({"n": passage.get("n"), "sentences": len(sentences), "relevant": chosen})
        return {
            "context_relevance": relevant / total if total else None,
            "passages": per_passage,
            "judge_fallbacks": fallbacks,
            "judge_calls": spent.llm_calls,
        }

    def _judge_answer(self, row: EvalRow) -> dict:
        answer = strip_citations(row.answer or row.prediction or "")
        if row.abstained or not answer:
            return {"answer_relevance": 0.0, "generated_questions": [], "judge_fallbacks": 0, "judge_calls": 0}
        return self.answer_relevance(row.question, answer)

    def _judge_context(self, row: EvalRow) -> dict:
        return self.context_relevance(row.question, row.citations or [])

    def judge_results(self, rows: list[EvalRow], metric: str, out_dir: Path) -> list[dict]:
        """Judge `metric` (answer_relevance or context_relevance) for every row without an error not yet judged
        by this judge, into out_dir/judgements-<metric>.jsonl (resumable)."""
        judge_row = {"answer_relevance": self._judge_answer, "context_relevance": self._judge_context}[metric]
        return judge_rows(rows, Path(out_dir) / judgements_file(metric), self.name, judge_row)


def attach(rows: list[EvalRow], metric: str, judgements: list[dict]) -> list[EvalRow]:
    """Rows with `metric` filled in from one judge's judgements of it; `relevance_fallbacks` adds up the judge
    replies that stayed unparseable over the relevance metrics attached."""
    by_key = {(j["config"], j["run"], j["id"]): j for j in judgements}
    out = []
    for row in rows:
        j = by_key.get(row.key)
        fallbacks = row.relevance_fallbacks if j is None else (row.relevance_fallbacks or 0) + j["judge_fallbacks"]
        out.append(row.model_copy(update={metric: j[metric] if j else None, "relevance_fallbacks": fallbacks}))
    return out
