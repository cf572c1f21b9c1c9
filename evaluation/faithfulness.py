"""LLM-judged faithfulness: is each answer sentence supported by the passage it cites? Off by default.

The judge is any Switchyard LLM backend, configured by the `llm:` section of a YAML file (`switchyard eval --judge
FILE`), so a stronger model behind an OpenAI-compatible server can judge a weaker local one. Per answer,
faithfulness = supported sentences / judged sentences. A sentence without a citation is unsupported and costs no
call; a cited sentence is supported when the judge accepts any one of its cited passages. A judge reply that stays
unparseable after the repair round leaves the sentence unjudged (counted in `judge_fallbacks`) rather than guessing.
Abstentions and empty answers have nothing to judge (faithfulness None).

Judgements are kept in their own file beside `questions.jsonl`, keyed by (config, run, question, judge), so answers
are never rewritten, a judge can be run over a finished evaluation, and an interrupted judging pass resumes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from switchyard.evaluation.jsonl import drop_torn_tail, read_results
from switchyard.evaluation.rows import EvalRow
from switchyard.llm.client import LLM
from switchyard.llm.factory import llm_identity
from switchyard.llm.prompts import JUDGE_FAITHFULNESS
from switchyard.run_context import RunContext
from switchyard.text import cited_numbers, split_sentences, strip_citations

JUDGEMENTS = "judgements.jsonl"


class SupportVerdict(BaseModel):
    supported: bool


class FaithfulnessJudge:
    """`run(answer, citations)` -> faithfulness of one answer, with a verdict per sentence."""

    def __init__(self, llm: LLM, name: str, max_passage_chars: int = 1500, max_tokens: int = 16):
        if not name:
            raise ValueError("the judge needs a name (it keys the stored judgements)")
        if max_passage_chars < 100 or max_tokens < 8:
            raise ValueError("max_passage_chars >= 100 and max_tokens >= 8")
        self.llm = llm
        self.name = name
        self.max_passage_chars = max_passage_chars
        self.max_tokens = max_tokens

    def _supports(self, sentence: str, passage: str, run: RunContext) -> bool | None:
        result = self.llm.structured(
            [
                {"role": "system", "content": JUDGE_FAITHFULNESS},
                {"role": "user", "content": f"Passage: {passage[: self.max_passage_chars]}\nClaim: {sentence}"},
            ],
            SupportVerdict,
            fallback=SupportVerdict(supported=False),
            max_tokens=self.max_tokens,
            run=run,
        )
        return None if result.status == "fallback" else result.value.supported

    def run(self, answer: str, citations: list[dict]) -> dict:
        run = RunContext()
        with run.metered() as spent:
            verdicts = self._verdicts(answer, citations, run)
        judged = [v for v in verdicts if v["supported"] is not None]
        return {
            "faithfulness": sum(v["supported"] for v in judged) / len(judged) if judged else None,
            "sentences": len(verdicts),
            "judge_fallbacks": len(verdicts) - len(judged),
            "judge_calls": spent.llm_calls,
            "verdicts": verdicts,
        }

    def _verdicts(self, answer: str, citations: list[dict], run: RunContext) -> list[dict]:
        by_number = {c["n"]: c for c in citations}
        verdicts = []
        for sentence in split_sentences(answer or ""):
            cited = sorted(cited_numbers(sentence) & set(by_number))
            claim = strip_citations(sentence)
            supported: bool | None = False
            for n in cited:
                supported = self._supports(claim, by_number[n]["text"], run)
                if supported:
                    break
            verdicts.append({"sentence": claim, "cited": cited, "supported": supported})
        return verdicts

    def judge_results(self, rows: list[EvalRow], out_path: Path) -> list[dict]:
        """Judge every answered row not yet judged by this judge; appends to `out_path` as it goes."""
        return judge_rows(rows, out_path, self.name, self._judge_row)

    def _judge_row(self, row: EvalRow) -> dict:
        if row.abstained or not row.prediction:
            return {"faithfulness": None, "sentences": 0, "judge_fallbacks": 0, "judge_calls": 0, "verdicts": []}
        # short answers: the evidence sentences carry the claims and their citations
        return self.run(row.evidence or row.prediction, row.citations or [])


def judge_rows(rows: list[EvalRow], out_path: Path, judge: str, judge_row: Callable[[EvalRow], dict]) -> list[dict]:
    """The one resumable judging pass of every LLM-judged metric: `judge_row(row)` for each row without an error
    that `out_path` holds no line of (config, run, question, `judge`) for yet, appended (and flushed) one JSON
    line at a time, so an interrupted pass resumes and answers are never rewritten. Returns `judge`'s lines."""
    drop_torn_tail(out_path)
    done = {judgement_key(j) for j in read_results(out_path)}
    with out_path.open("a", encoding="utf-8") as out:
        for row in rows:
            key = (*row.key, judge)
            if key in done or row.error:
                continue
            verdict = judge_row(row)
            line = {"config": row.config, "run": row.run, "id": row.id, "judge": judge, **verdict}
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            out.flush()
            done.add(key)
    return [j for j in read_results(out_path) if j["judge"] == judge]


def judgement_key(j: dict) -> tuple:
    return j["config"], j["run"], j["id"], j["judge"]


def judge_name(llm_config) -> str:
    """Stable name of a judge: its model plus a short hash of its whole LLM config."""
    model = (
        Path(llm_identity(llm_config)["model"]).stem
        if llm_config.backend == "local"
        else llm_identity(llm_config)["model"]
    )
    digest = hashlib.sha256(llm_config.model_dump_json().encode()).hexdigest()[:8]
    return f"{llm_config.backend}:{model}:{digest}"


def attach_judgements(rows: list[EvalRow], judgements: list[dict]) -> list[EvalRow]:
    """Rows with `faithfulness` and `judge_fallbacks` filled in from one judge's judgements."""
    by_key = {(j["config"], j["run"], j["id"]): j for j in judgements}
    out = []
    for row in rows:
        j = by_key.get(row.key)
        out.append(
            row.model_copy(
                update={
                    "faithfulness": j["faithfulness"] if j else None,
                    "judge_fallbacks": j["judge_fallbacks"] if j else None,
                }
            )
        )
    return out
