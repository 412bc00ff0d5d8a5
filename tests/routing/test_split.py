"""Canary / A-B splits."""

from __future__ import annotations

import pytest

from tokenplane.routing.endpoint import RouteRequest
from tokenplane.routing.split import SplitRule, stable_fraction


def test_canary_ten_percent_within_tolerance() -> None:
    rule = SplitRule(weights=[("stable", 90), ("canary", 10)])
    n = 2000
    canary = sum(rule.choose(RouteRequest(f"req-{i}")) == "canary" for i in range(n))
    # binomial sd = sqrt(2000 * 0.1 * 0.9) ~ 13.4; allow ~3 sd
    assert abs(canary - 200) <= 40


def test_split_is_deterministic_and_session_sticky() -> None:
    rule = SplitRule(weights=[("a", 1), ("b", 1)], by="session")
    versions = {rule.choose(RouteRequest(f"r{i}", session_id="s-42")) for i in range(50)}
    assert len(versions) == 1
    assert rule.choose(RouteRequest("x")) == rule.choose(RouteRequest("x"))


def test_header_and_tenant_pins_win() -> None:
    rule = SplitRule(
        weights=[("stable", 1.0)],
        header="x-model-version",
        header_versions={"canary": "v2"},
        tenant_versions={"acme": "v3"},
    )
    assert rule.choose(RouteRequest("r", keys={"x-model-version": "canary"})) == "v2"
    assert rule.choose(RouteRequest("r", tenant="acme")) == "v3"
    assert rule.choose(RouteRequest("r", keys={"x-model-version": "other"})) == "stable"


def test_bad_rules_rejected() -> None:
    with pytest.raises(ValueError):
        SplitRule(weights=[])
    with pytest.raises(ValueError):
        SplitRule(weights=[("a", -1.0), ("b", 2.0)])
    with pytest.raises(ValueError):
        SplitRule(weights=[("a", 1.0)], by="moon")


def test_stable_fraction_range_and_salt() -> None:
    vals = [stable_fraction(str(i)) for i in range(1000)]
    assert all(0.0 <= v < 1.0 for v in vals)
    assert stable_fraction("k", "s1") != stable_fraction("k", "s2")
