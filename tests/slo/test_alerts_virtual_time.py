"""Burn-rate alerting in virtual time, on synthetic minute-by-minute traffic.

10 requests a second; an objective of 99.9% over 30 days with the workbook's default
rules. Bad events are spread evenly (an error accumulator), so the figures are exact.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenplane.slo.alerts import AlertBook, Transition, evaluate
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules
from tokenplane.slo.tally import BucketTally

PER_MINUTE = 600
DAY_MIN = 24 * 60
SLO = Slo(
    name="chat-ttft", selector=Selector(), slis=(Sli(SliKind.TTFT, 1.0),),
    objective=0.999, window_s=30 * 86400.0, rules=default_rules(30 * 86400.0, 0.999),
)
START = 1_700_000_040.0  # on a minute boundary


def run(minutes: int, bad_share: Callable[[int], float], every: int = 1,
        ) -> list[tuple[int, Transition]]:
    """Feed ``minutes`` of traffic (``bad_share(minute)`` of each minute bad), evaluate
    at the end of every ``every``-th minute; the transitions, by minute."""
    tally = BucketTally(60)
    book = AlertBook()
    carry = 0.0
    out: list[tuple[int, Transition]] = []
    for m in range(minutes):
        carry += bad_share(m) * PER_MINUTE
        bad = int(carry)
        carry -= bad
        tally.add_bucket(tally.bucket_of(START + m * 60), PER_MINUTE, bad)
        if m % every == every - 1:
            now = START + m * 60 + 59.0
            out += [(m, t) for t in book.update(evaluate(SLO, {"ttft": tally}, now), now)]
    return out


def test_an_incident_pages_within_five_minutes_and_resolves_after() -> None:
    # six quiet hours (burn 0.2), then one of four replicas 5x slower for 20 minutes:
    # a quarter of the requests miss their TTFT target (burn 250), then quiet again
    incident = range(360, 380)
    got = run(360 + 20 + 370, lambda m: 0.25 if m in incident else 0.0002)
    fast = [(m, t) for m, t in got if t.firing.key.long_s == 3600]
    assert [t.state for _, t in fast] == ["firing", "resolved"]
    fired_at, resolved_at = fast[0][0], fast[1][0]
    assert 360 <= fired_at < 365, "the 14.4x page fires within five minutes"
    assert 380 <= resolved_at <= 386, "and resolves once the 5-minute window is clean"
    first = fast[0][1].firing
    assert first.long_burn > 14.4 and first.short_burn > 14.4
    assert first.key.severity == "page"
    # the slower page (6x over 6 h) follows, and the 3-day ticket (a 20-minute outage
    # of a quarter spends a seventh of a 99.9% month); each resolves once its short
    # window is clean
    assert any(t.firing.key.long_s == 21600 and t.state == "firing" for _, t in got)
    states: dict[object, str] = {}
    for _, t in got:
        states[t.firing.key] = t.state
    assert set(states.values()) == {"resolved"}


def test_a_healthy_day_fires_nothing() -> None:
    # 0.05% bad all day: half the budget's pace, with a brief 2-minute blip at 2%
    blip = range(600, 602)
    assert run(DAY_MIN, lambda m: 0.02 if m in blip else 0.0005, every=5) == []


def test_a_slow_leak_opens_a_ticket_and_never_pages() -> None:
    # 1.2x the sustainable rate for four days
    got = run(4 * DAY_MIN, lambda m: 0.0012, every=10)
    severities = {t.firing.key.severity for _, t in got}
    assert severities == {"ticket"}
    assert got[0][1].state == "firing"
    assert got[0][1].firing.long_burn > 1.0
