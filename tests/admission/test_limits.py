"""Limit specifications validate clearly and compile to the right primitive rules."""

from __future__ import annotations

import pytest

from tokenplane.admission import LimitError, LimitTable, Parties, Period, Scope, ScopeLimits
from tokenplane.admission.limits import LimitRule


def test_scope_limits_compile_to_rules() -> None:
    spec = ScopeLimits(rpm=10, tpm=1000, tpm_unit="output_tokens", tokens_per_day=5,
                       tokens_per_month=50, budget_micros=7, budget_period=Period("weekly"),
                       max_concurrent=3, max_tokens_in_flight=900)
    rules = {r.name: r for r in spec.rules()}
    assert set(rules) == {"rpm", "tpm", "tokens_per_day", "tokens_per_month", "budget",
                          "max_concurrent", "max_tokens_in_flight"}
    assert (rules["rpm"].kind, rules["rpm"].unit, rules["rpm"].window_ms) == (
        "window", "requests", 60_000)
    assert rules["tpm"].unit == "output_tokens"
    assert rules["budget"].period == Period("weekly") and rules["budget"].code == (
        "budget_exceeded")
    assert rules["max_concurrent"].code == "concurrency_limit_exceeded"
    assert rules["rpm"].code == "rate_limit_exceeded"
    assert ScopeLimits().rules() == ()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"rpm": -1}, "rpm"),
        ({"tpm": 1.5}, "tpm"),
        ({"budget_micros": True}, "budget_micros"),
        ({"tpm_unit": "cost_micros"}, "tpm_unit"),
    ],
)
def test_bad_scope_limits_name_the_field(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(LimitError, match=needle):
        ScopeLimits(**kwargs)  # type: ignore[arg-type]


def test_bad_rules_are_refused() -> None:
    with pytest.raises(LimitError, match="period"):
        LimitRule("b", "calendar", "cost_micros", 5)
    with pytest.raises(LimitError, match="window_s"):
        LimitRule("w", "window", "requests", 5, window_s=0)
    with pytest.raises(LimitError, match="name"):
        LimitRule("a:b", "gauge", "requests", 5)


def test_scope_chain_lists_every_level_with_model_variants() -> None:
    chain = Parties("acme", department="eng", app="bot", key="k1", user="u9").scope_chain("m")
    assert [s.label for s in chain] == [
        "tenant:acme", "tenant:acme@m", "department:eng", "department:eng@m",
        "app:bot", "app:bot@m", "key:k1", "key:k1@m", "user:u9", "user:u9@m",
    ]
    assert [s.label for s in Parties("acme", app="bot").scope_chain()] == [
        "tenant:acme", "app:bot"]
    with pytest.raises(ValueError):
        Scope("galaxy", "x")  # type: ignore[arg-type]


def test_table_binds_only_configured_scopes_once() -> None:
    t = Scope("tenant", "acme")
    table = LimitTable({t: ScopeLimits(rpm=1), Scope("app", "bot", "m"): ScopeLimits(tpm=9)})
    bound = table.bind([t, t, Scope("app", "bot"), Scope("app", "bot", "m")], now=0.0)
    assert [b.key for b in bound] == ["tenant:acme:rpm", "app:bot@m:tpm"]
    table.set(t, ScopeLimits())
    assert table.rules(t) == ()
