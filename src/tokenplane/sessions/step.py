"""What the session stage decided for one request, read by admission and the meter."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.admission.limits import LimitRule


@dataclass(slots=True)
class SessionStep:
    session_id: str
    step: int
    rules: tuple[LimitRule, ...] = ()  # the session's budget (empty: no cap)
    tool_output_tokens: int = 0
    tool_output_added: int = 0
    tool_output_removed: int = 0
    # digests of the prompt's tool results (sessions/tool_links.py), for the audit log
    tool_results: tuple[str, ...] = ()
