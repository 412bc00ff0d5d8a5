"""A session's budget as admission rules: reserved step by step like any limit.

The cap is a sliding-window rule of admission (``admission/limits.py``) on the scope
``session:<tenant>/<session id>``, over ``window_s`` (the sessions config): one
reservation per step at every scope of the caller at once, the stream debited
before tokens are forwarded, the real usage settled at the end; with Redis the
counters are shared by every replica, so the cap holds across them exactly as the
other limits do (docs/ADMISSION.md). A window rather than a calendar budget, so a
session's counters expire ``window_s`` after its last step.
"""

from __future__ import annotations

from decimal import Decimal

from tokenplane.admission.binding import BoundLimit, bind
from tokenplane.admission.limits import LimitRule
from tokenplane.admission.money import money
from tokenplane.admission.outcomes import Denial
from tokenplane.admission.scopes import Scope
from tokenplane.config.sessions_schema import SessionBudgetConfig

TOKENS_RULE = "session_tokens"
COST_RULE = "session_cost"


def session_scope(tenant: str, session_id: str) -> Scope:
    return Scope("session", f"{tenant}/{session_id}")


def session_rules(budget: SessionBudgetConfig, window_s: float) -> tuple[LimitRule, ...]:
    out: list[LimitRule] = []
    if budget.max_tokens is not None:
        out.append(LimitRule(TOKENS_RULE, "window", "total_tokens", budget.max_tokens,
                             window_s))
    if budget.max_cost is not None:
        micros = int((budget.max_cost * Decimal(1_000_000)).to_integral_value())
        out.append(LimitRule(COST_RULE, "window", "cost_micros", micros, window_s))
    return tuple(out)


def session_limits(tenant: str, session_id: str, rules: tuple[LimitRule, ...],
                   now: float) -> list[BoundLimit]:
    """The session's rules bound to its scope (empty: no cap)."""
    scope = session_scope(tenant, session_id)
    return [bind(scope, rule, now) for rule in rules]


def describe_denial(session_id: str, denial: Denial, currency: str,
                    needs: int | None = None) -> str:
    """The 429's message: which session, which cap, what is left, what the step
    needed (``needs``, in the cap's unit), what to do."""
    asked = needs if needs is not None else denial.requested
    if denial.unit == "cost_micros":
        cap = f"{money(denial.limit, currency)}"
        left = f"{money(max(0, denial.remaining), currency)}"
        need = f"{money(asked, currency)}" if asked else ""
    else:
        cap, left = f"{denial.limit} tokens", f"{max(0, denial.remaining)} tokens"
        need = f"{asked} tokens" if asked else ""
    asks = f"; this step needs {need}" if need else ""
    return (f"Session '{session_id}' has spent its budget ({denial.limit_name}: {cap} per "
            f"session, {left} left{asks}). Start a new session or raise the session "
            "budget (sessions.budget).")
