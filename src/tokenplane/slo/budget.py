"""Error-budget arithmetic for one SLI over one window.

With objective ``o`` the budget is the share ``1 - o`` of valid events that may be
bad. Over ``valid`` events of which ``bad`` were bad:

- the SLI is ``good / valid`` (1.0 when nothing was valid: nothing went wrong);
- the burn rate is ``(bad / valid) / (1 - o)``: 1.0 spends the budget exactly over
  the window, 14.4 spends a 30-day budget in about two days;
- the budget allows ``(1 - o) * valid`` bad events; ``bad_left`` is that minus ``bad``
  (negative once overspent) and ``remaining`` is ``bad_left`` as a share of the
  allowance (1.0 untouched, 0 spent, below 0 overspent).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.slo.tally import Tally


@dataclass(frozen=True, slots=True)
class BudgetState:
    valid: int
    bad: int
    sli: float
    allowed_bad: float
    bad_left: float
    remaining: float


def burn_rate(tally: Tally, objective: float) -> float:
    if tally.valid == 0:
        return 0.0
    return (tally.bad / tally.valid) / (1.0 - objective)


def budget(tally: Tally, objective: float) -> BudgetState:
    allowed = (1.0 - objective) * tally.valid
    left = allowed - tally.bad
    if tally.valid == 0:
        return BudgetState(0, 0, 1.0, 0.0, 0.0, 1.0)
    remaining = left / allowed
    return BudgetState(
        valid=tally.valid,
        bad=tally.bad,
        sli=tally.good / tally.valid,
        allowed_bad=allowed,
        bad_left=left,
        remaining=remaining,
    )
