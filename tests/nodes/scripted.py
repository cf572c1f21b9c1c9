"""A scripted LLM for forcing control-flow paths: replies chosen by which node's prompt it sees."""

from __future__ import annotations

import json

from switchyard.llm.client import LLM
from tests.scripted_backend import ScriptedBackend

# the router strategies' other prompts, by how their system prompt starts (see llm/prompts.py)
_KINDS = (
    ("You control", "Do not act yet", "think"),
    ("You control", "Write the plan", "planner"),
    ("You control", "", "router"),
    ("You are an autonomous agent", "", "router"),
    ("You coordinate", "", "controller"),
    ("You are the search agent", "", "searcher"),
    ("You are the answer agent", "", "answerer"),
    ("Merge these notes", "", "summary"),
)


def _kind(system: str) -> str:
    if system.startswith("Rewrite"):
        return "rewrite"
    if system.startswith("Does the passage"):
        return "grade"
    if system.startswith("Rate how well"):
        return "rerank"
    for start, contains, kind in _KINDS:
        if system.startswith(start) and contains in system:
            return kind
    return "answer"


def scripted_llm(
    rewrite=None,
    grade=None,
    answer=None,
    rerank=None,
    router=None,
    think=None,
    planner=None,
    controller=None,
    searcher=None,
    answerer=None,
    summary=None,
    max_retries: int = 0,
) -> tuple[LLM, ScriptedBackend]:
    """Each argument is a reply string, or a list consumed in order (the last repeats), for that node's prompts;
    `router` may also be a function of the call number returning a reply. `planner` scripts the plan requests
    (plan, plan-react; without it they take `router` replies), `think` (zeroshot-think's thought),
    `controller`, `searcher`, `answerer` (bolaa) and `summary` (autogpt's memory) script the strategies' other
    prompts; the autogpt decision is a `router` reply."""
    queues = {
        "rewrite": rewrite,
        "grade": grade,
        "answer": answer,
        "rerank": rerank,
        "router": router,
        "think": think,
        "planner": planner,
        "controller": controller,
        "searcher": searcher,
        "answerer": answerer,
        "summary": summary,
    }
    used = {k: 0 for k in queues}

    def reply(messages, schema):
        kind = _kind(messages[0]["content"])
        if kind == "planner" and planner is None:
            kind = "router"
        script = queues[kind]
        if script is None:
            script = {
                "rewrite": json.dumps({"query": "railway"}),
                "grade": '{"relevant": true}',
                "rerank": '{"relevant": true, "score": 5}',
                "answer": "NOT FOUND",
                "router": '{"action": "abstain", "reason": "no script"}',
                "think": "I should search first.",
                "controller": '{"agent": "answer", "message": "no script"}',
                "searcher": '{"action": "grade"}',
                "answerer": '{"action": "abstain", "reason": "no script"}',
                "summary": "notes merged",
            }[kind]
        if callable(script):
            used[kind] += 1
            return script(used[kind])
        if isinstance(script, list):
            i = min(used[kind], len(script) - 1)
            used[kind] += 1
            return script[i]
        return script

    backend = ScriptedBackend(reply)
    return LLM(backend, max_retries=max_retries, backoff_s=0.0), backend


AGENT_ANSWER = "The Janney coupler was patented by Eli Janney in 1873 [1]."
_AGENT_NEXT = {
    "(none)": ("retrieve", {"query": "knuckle coupler patent"}),
    "retrieve": ("rerank", {}),
    "rerank": ("grade", {}),
    "grade": ("answer", {}),
    "rewrite": ("retrieve", {"query": "coupler"}),
}


def zeroshot_agent(messages, schema=None) -> str:
    """Replies of a whole zeroshot agent run, stateless (a restarted server or a rejected step replays the same
    way): the router's next action follows from the state summary's last action (retrieve, rerank, grade, answer);
    grading finds the passages relevant; the answer is AGENT_ANSWER."""
    system = messages[0]["content"]
    if system.startswith("You control"):
        last = messages[-1]["content"].split("Last action: ")[1].split(";")[0]
        action, args = _AGENT_NEXT.get(last, ("answer", {}))
        return json.dumps({"thought": f"do {action}", "action": action, **args})
    return {
        "rewrite": json.dumps({"query": "knuckle coupler"}),
        "grade": '{"relevant": true}',
        "rerank": '{"relevant": true, "score": 5}',
    }.get(_kind(system), AGENT_ANSWER)
