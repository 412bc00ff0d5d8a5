"""SLI, budget and burn-rate arithmetic against hand-computed figures."""

from __future__ import annotations

import pytest

from tokenplane.config.slo_schema import SloConfig, parse_duration
from tokenplane.slo.budget import budget, burn_rate
from tokenplane.slo.spec import default_rules, slo_from_config
from tokenplane.slo.tally import BucketTally, Tally


def test_budget_of_a_window_by_hand() -> None:
    # 95%: 1000 valid may have 50 bad; 20 were bad: SLI 0.98, 30 left = 60% of it
    state = budget(Tally(valid=1000, bad=20), 0.95)
    assert state.sli == pytest.approx(0.98)
    assert state.allowed_bad == pytest.approx(50)
    assert state.bad_left == pytest.approx(30)
    assert state.remaining == pytest.approx(0.6)
    assert burn_rate(Tally(1000, 20), 0.95) == pytest.approx(0.4)


def test_overspent_budget_goes_negative() -> None:
    state = budget(Tally(valid=200, bad=30), 0.9)  # 20 allowed, 30 bad
    assert state.bad_left == pytest.approx(-10)
    assert state.remaining == pytest.approx(-0.5)
    assert burn_rate(Tally(200, 30), 0.9) == pytest.approx(1.5)


def test_nothing_valid_is_a_full_budget_and_no_burn() -> None:
    state = budget(Tally(), 0.99)
    assert (state.sli, state.remaining, state.bad_left) == (1.0, 1.0, 0.0)
    assert burn_rate(Tally(), 0.99) == 0.0


def test_workbook_rules_for_thirty_days() -> None:
    rules = default_rules(30 * 86400, 0.999)
    assert [(r.severity, r.burn_rate, r.long_s, r.short_s) for r in rules] == [
        ("page", pytest.approx(14.4), 3600, 300),
        ("page", pytest.approx(6.0), 21600, 1800),
        ("ticket", pytest.approx(1.0), 259200, 21600),
    ]


def test_workbook_rules_keep_their_budget_share_for_other_windows() -> None:
    week = default_rules(7 * 86400, 0.99)
    assert [r.burn_rate for r in week] == pytest.approx([3.36, 1.4, 0.1 * 168 / 72])
    day = default_rules(86400, 0.99)  # the 3-day ticket cannot fit a 1-day window
    assert [r.severity for r in day] == ["page", "page"]
    # 90 days at 95%: 14.4 * 3 = 43.2 is beyond the 20x of a total outage: 90% of it
    quarter = default_rules(90 * 86400, 0.95)
    assert quarter[0].burn_rate == pytest.approx(18.0)


def test_config_to_policy() -> None:
    cfg = SloConfig.model_validate({
        "name": "chat", "objective": 0.95, "window": "7d",
        "selector": {"model": "m", "slo_class": "interactive"},
        "slis": [{"kind": "ttft", "threshold": "800ms"}, {"kind": "availability"}],
        "alerts": [{"severity": "page", "burn_rate": 10, "long_window": "1h",
                    "short_window": "5m"}],
    })
    slo = slo_from_config(cfg)
    assert slo.window_s == 7 * 86400
    assert slo.slis[0].threshold_s == pytest.approx(0.8)
    assert slo.rules[0].burn_rate == 10 and slo.rules[0].short_s == 300
    assert slo.selector.selects("m", "t", "d", "a", "interactive")
    assert not slo.selector.selects("m", "t", "d", "a", "batch")
    assert not slo.selector.selects("other", "t", "d", "a", "interactive")


@pytest.mark.parametrize("text,seconds", [
    ("250ms", 0.25), ("30s", 30), ("5m", 300), ("1h", 3600), ("30d", 2592000),
    ("2w", 1209600), (1.5, 1.5), ("1.5h", 5400),
])
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "5", "5 minutes", "-1s", "0s", 0, -3, "1e400s", True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)  # type: ignore[arg-type]


def test_window_sums_whole_buckets_and_rolls_over() -> None:
    t = BucketTally(60)
    base = 1_000_020.0  # bucket 16667 starts at 1_000_020
    for minute in range(10):
        t.add(base + minute * 60 + 1, bad=minute % 2 == 0)
        t.add(base + minute * 60 + 2, bad=False)
    now = base + 9 * 60 + 30  # inside the tenth bucket
    assert t.window(now, 600) == Tally(20, 5)  # all ten buckets
    assert t.window(now, 300) == Tally(10, 2)  # the last five: minutes 5..9
    assert t.window(now, 30) == Tally(2, 0)  # only the current bucket
    later = now + 120  # two buckets on: minutes 0 and 1 fall out of a 10-minute span
    assert t.window(later, 600) == Tally(16, 4)
    t.prune(later - 600)
    assert len(t) == 8  # minute 1 holds later - 600: no longer summed, so gone
    assert t.window(later, 3600) == Tally(16, 4)


def test_bulk_buckets_match_single_adds() -> None:
    a, b = BucketTally(60), BucketTally(60)
    for i in range(300):
        a.add(6000.0 + i, bad=i % 7 == 0)
    for bucket in range(100, 105):
        start = bucket * 60
        valid = sum(1 for i in range(300) if start <= 6000 + i < start + 60)
        bad = sum(1 for i in range(300) if start <= 6000 + i < start + 60 and i % 7 == 0)
        b.add_bucket(bucket, valid, bad)
    assert a.window(6299.0, 3600) == b.window(6299.0, 3600) == Tally(300, 43)
