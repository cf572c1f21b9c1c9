"""Router strategies (`graph.router.strategy`): each proposes the next decision for one step; nodes/router.py
applies the same guards and budget to every proposal. A strategy is `(state, res, steps_left, run) -> Proposal`;
whatever it keeps between steps (plan, memory) goes back into the graph state through `Proposal.update`."""

from __future__ import annotations

from collections.abc import Callable

from switchyard.nodes.strategies.autogpt import autogpt
from switchyard.nodes.strategies.bolaa import bolaa
from switchyard.nodes.strategies.common import Proposal
from switchyard.nodes.strategies.plan import plan, plan_react
from switchyard.nodes.strategies.react import react
from switchyard.nodes.strategies.zeroshot import zeroshot, zeroshot_think

Strategy = Callable[..., Proposal]
STRATEGIES: dict[str, Strategy] = {
    "zeroshot": zeroshot,
    "zeroshot-think": zeroshot_think,
    "react": react,
    "plan": plan,
    "plan-react": plan_react,
    "bolaa": bolaa,
    "autogpt": autogpt,
}
