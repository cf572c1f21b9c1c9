"""A scripted LLM for forcing control-flow paths: replies chosen by which node's prompt it sees."""
from __future__ import annotations

import json

from llm.client import LLM
from tests.scripted_backend import ScriptedBackend


def scripted_llm(rewrite=None, grade=None, answer=None, rerank=None, router=None,
                 max_retries: int = 0) -> tuple[LLM, ScriptedBackend]:
    """Each argument is a reply string, or a list consumed in order (the last repeats), for that node's prompts;
    `router` may also be a function of the call number returning a reply."""
    queues = {"rewrite": rewrite, "grade": grade, "answer": answer, "rerank": rerank, "router": router}
    used = {k: 0 for k in queues}

    def reply(messages, schema):
        system = messages[0]["content"]
        kind = ("rewrite" if system.startswith("Rewrite") else "grade" if system.startswith("Does the passage")
                else "rerank" if system.startswith("Rate how well") else "router" if system.startswith("You control")
                else "answer")
        script = queues[kind]
        if script is None:
            script = {"rewrite": json.dumps({"query": "railway"}), "grade": '{"relevant": true}',
                      "rerank": '{"relevant": true, "score": 5}', "answer": "NOT FOUND",
                      "router": '{"action": "abstain", "reason": "no script"}'}[kind]
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
