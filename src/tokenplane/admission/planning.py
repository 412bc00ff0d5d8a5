"""What to reserve for a request: exact prompt plus a capped output prediction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tokenplane.admission.amounts import Amounts

CostFn = Callable[[int, int], int]  # (input_tokens, output_tokens) -> cost in micros


@dataclass(frozen=True, slots=True)
class ReservationPlan:
    """The amounts to reserve and the ``max_tokens`` to send upstream.

    ``max_tokens`` is ``None`` when neither the client nor the budget bounds the
    output; ``0`` means the budget allows no output at all (refuse the request).
    """

    amounts: Amounts
    max_tokens: int | None
    clamped: bool


def clamp_share(allowed: int, in_flight: int, window_room: int) -> int:
    """The most output tokens ``clamp_max_tokens`` gives one request: what the token
    limits still allow (``allowed``, from :meth:`Admission.allowed_tokens`) shared
    among this request, the caller's ``in_flight`` others and one more to come (so a
    request alone takes at most half of what is left, and a burst splits it), and
    never past the context window's room (the window less the prompt). At least 1
    while anything is left; 0 when nothing is."""
    if allowed <= 0 or window_room <= 0:
        return 0
    return max(1, min(allowed // (max(0, in_flight) + 2), window_room))


def plan_reservation(prompt_tokens: int, *, max_tokens: int | None,
                     predicted_output: int | None, default_output: int = 256,
                     allowed_output: int | None = None,
                     cost: CostFn | None = None,
                     reserve_cap: bool = False) -> ReservationPlan:
    """Reserve the exact prompt and the predicted output (the default without history).

    The prediction is capped by ``max_tokens``, and ``max_tokens`` is clamped to
    ``allowed_output`` (from :meth:`Admission.allowed_tokens`, shared by
    :func:`clamp_share`) when given. At least one output token is reserved whenever
    any output is allowed, which keeps the overshoot bound of docs/ADMISSION.md.
    ``reserve_cap`` (the clamp): the whole capped ``max_tokens`` is reserved instead
    of the prediction, so the request can never use more than it was granted.
    """
    if prompt_tokens < 0:
        raise ValueError("prompt_tokens must be >= 0")
    cap = max_tokens
    clamped = False
    if allowed_output is not None and (cap is None or allowed_output < cap):
        cap, clamped = max(0, allowed_output), True
    output = default_output if predicted_output is None else predicted_output
    if reserve_cap and cap is not None:
        output = cap
    elif cap is not None:
        output = min(output, cap)
    output = max(output, 1 if cap != 0 else 0)
    micros = cost(prompt_tokens, output) if cost is not None else 0
    return ReservationPlan(Amounts(1, prompt_tokens, output, micros), cap, clamped)
