"""Turn the raw integer answers of a counter store into admission outcomes."""

from __future__ import annotations

from collections.abc import Sequence

from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.outcomes import (
    Alert,
    DebitResult,
    Denial,
    Grant,
    Headroom,
    LimitStatus,
    Settlement,
)


def _reset_s(b: BoundLimit, now: float) -> float:
    if b.rule.kind == "window":
        return b.rule.window_s
    if b.rule.kind == "calendar":
        return max(0.0, b.win_end_ms / 1000 - now)
    return 0.0


def _alerts(raw: Sequence[int], start: int, limits: Sequence[BoundLimit]) -> tuple[Alert, ...]:
    out: list[Alert] = []
    for k in range(start, len(raw) - 2, 3):
        b = limits[int(raw[k]) - 1]
        out.append(Alert(b.scope, b.rule.name, int(raw[k + 1]), int(raw[k + 2]), b.rule.limit))
    return tuple(out)


def denial(raw: Sequence[int], limits: Sequence[BoundLimit]) -> Denial:
    b = limits[int(raw[1]) - 1]
    retry = int(raw[3])
    return Denial(
        scope=b.scope,
        limit_name=b.rule.name,
        limit=b.rule.limit,
        remaining=int(raw[2]),
        retry_after_s=None if retry < 0 else retry / 1000,
        code=b.rule.code,
        unit=b.rule.unit,
        rule=b.rule,
    )


def headroom(raw: Sequence[int], limits: Sequence[BoundLimit],
             now: float) -> tuple[Headroom, ...]:
    return tuple(
        Headroom(b.scope, b.rule.name, b.rule.unit, b.rule.kind, b.rule.limit,
                 max(0, int(raw[i + 1])), _reset_s(b, now))
        for i, b in enumerate(limits)
    )


def grant_or_denial(raw: Sequence[int], rid: str, tenant: str, amounts: Amounts,
                    limits: Sequence[BoundLimit], now: float, ttl_s: float) -> Grant | Denial:
    if int(raw[0]) == 0:
        return denial(raw, limits)
    return Grant(
        reservation_id=rid,
        tenant=tenant,
        amounts=amounts,
        limits=tuple(limits),
        expires_at=now + ttl_s,
        headroom=headroom(raw, limits, now),
        alerts=_alerts(raw, 1 + len(limits), limits),
    )


def debit_result(raw: Sequence[int], limits: Sequence[BoundLimit]) -> DebitResult:
    code = int(raw[0])
    if code == -1:
        return DebitResult(ok=False)
    if code == 0:
        return DebitResult(ok=False, denial=denial(raw, limits))
    return DebitResult(ok=True, alerts=_alerts(raw, 1 + len(limits), limits))


def settlement(raw: Sequence[int], limits: Sequence[BoundLimit]) -> Settlement:
    return Settlement(found=int(raw[0]) == 1, alerts=_alerts(raw, 1, limits))


def statuses(raw: Sequence[int], limits: Sequence[BoundLimit],
             now: float) -> list[LimitStatus]:
    out: list[LimitStatus] = []
    for i, b in enumerate(limits):
        used, held = int(raw[2 * i]), int(raw[2 * i + 1])
        resets: float | None = None
        if b.rule.kind == "calendar":
            resets = b.win_end_ms / 1000
        elif b.rule.kind == "window":
            resets = now + b.rule.window_s
        out.append(
            LimitStatus(
                scope=b.scope,
                limit_name=b.rule.name,
                kind=b.rule.kind,
                unit=b.rule.unit,
                limit=b.rule.limit,
                spent=used - held,
                reserved=held,
                remaining=max(0, b.rule.limit - used),
                resets_at=resets,
            )
        )
    return out
