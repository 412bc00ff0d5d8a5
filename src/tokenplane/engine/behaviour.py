"""How a simulated model behaves beyond its speed (a backend's ``sim`` options, the
``serve-engines`` flags): how often it calls a tool when the request leaves the choice
to it, and whether it is a reasoning model."""

from __future__ import annotations

import re
from dataclasses import dataclass

_REASONER = re.compile(r"reason|(^|[^a-z0-9])r1([^0-9]|$)|thinking", re.IGNORECASE)
REASONING_EFFORT = "medium"  # what a reasoning model spends when the request says nothing


@dataclass(frozen=True)
class SimBehaviour:
    """``tool_call_rate``: the share of ``tool_choice: auto`` requests (with tools, not
    answering a tool result) that get tool calls, drawn per request from its seed.
    ``reasoning``: every answer starts with reasoning tokens (``reasoning_content``);
    None: a model whose name says it reasons ('reasoner', 'r1', 'thinking') does."""

    tool_call_rate: float = 0.5
    reasoning: bool | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.tool_call_rate <= 1.0:
            raise ValueError("tool_call_rate must be between 0 and 1")

    def reasons(self, model: str) -> bool:
        if self.reasoning is not None:
            return self.reasoning
        return _REASONER.search(model) is not None
