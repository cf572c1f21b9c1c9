"""abstain: the corrective loop ran out of retries; say so explicitly instead of guessing."""
from __future__ import annotations

from nodes.answer import abstention
from nodes.resources import Resources


def abstain(state: dict, res: Resources) -> dict:
    tries = state.get("attempts", 0)
    return abstention(res.config.answer.abstain_message,
                      f"no relevant passages after {tries} retrieval round(s): {state.get('feedback', '')}")
