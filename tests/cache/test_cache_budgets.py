"""Cache hits against budgets: admission settles a hit at what the ledger bills it
(money at the billing rule, tokens per ``billing.tokens``), on the embedded store and
on the real Redis that two gateways share; a free hit (the default) costs no money
and no tokens, and counts as a request."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.cache.harness import cache_config, chat, post
from tests.gateway.harness import GatewayThread
from tests.services import REDIS_URL, fresh_redis_prefix
from tokenplane.admission import Scope
from tokenplane.meta.limit_store import LimitTarget

# per million tokens: large enough that a discounted share is many micro-units
PRICES = {"input": "100", "cached_input": "50", "output": "400"}
LIMITS = {"rpm": 1000, "tokens_per_day": 10_000_000, "budget_micros": 10**12,
          "budget_period": "monthly"}


def _config(billing: dict[str, Any], **top: Any) -> dict[str, Any]:
    cache = {"billing": billing, "rules": [{"app": "support", "semantic": True}],
             **top.pop("cache", {})}
    cfg = cache_config(cache, **top)
    cfg["models"][0]["prices"] = PRICES
    cfg["admission"] = {"limits_reload_s": 0, "predict_output": False,
                        "default_output_tokens": 12, **cfg.get("admission", {})}
    return cfg


def _limit(gw: GatewayThread) -> None:
    svc = gw.gateway.admission
    assert svc is not None
    svc.limits.set(LimitTarget("alpha"), LIMITS)


def _spent(gw: GatewayThread) -> dict[str, tuple[int, int]]:
    """(spent, reserved) of each of the tenant's limits, by name."""
    svc = gw.gateway.admission
    assert svc is not None
    statuses = gw.call(svc.admission.status("alpha", Scope("tenant", "alpha"), svc.now()))
    return {s.limit_name: (s.spent, s.reserved) for s in statuses}


def _share(charge: str, n: int) -> int:
    return int((Decimal(n) * Decimal(charge)).to_integral_value(ROUND_HALF_UP))


def _hit_tokens(row: dict[str, Any], billing: dict[str, Any]) -> int:
    """What a hit's ledger row says it counts against token limits."""
    tokens = billing.get("tokens", "none")
    saved = (row["saved_input_tokens"], row["saved_output_tokens"])
    if tokens == "saved":
        return sum(saved)
    if tokens == "charged" and billing.get("mode") == "discounted":
        return sum(_share(billing["charge"], n) for n in saved)
    return 0


def _expected(rows: list[dict[str, Any]], billing: dict[str, Any]) -> dict[str, int]:
    """The budgets' spent amounts as the ledger bills the requests."""
    return {
        "rpm": len(rows),
        "budget": sum(r["cost_micros"] for r in rows),
        "tokens_per_day": sum(r["input_tokens"] + r["output_tokens"]
                              + (_hit_tokens(r, billing) if r["cache"] else 0)
                              for r in rows),
    }


BILLINGS = [
    pytest.param({}, id="default-free"),
    pytest.param({"mode": "discounted", "charge": "0.25"}, id="discounted-money-only"),
    pytest.param({"mode": "discounted", "charge": "0.25", "tokens": "charged"},
                 id="discounted-tokens-charged"),
    pytest.param({"mode": "free", "tokens": "saved"}, id="free-tokens-saved"),
]


@pytest.mark.parametrize("billing", BILLINGS)
def test_budgets_see_what_a_hit_is_billed(tmp_path: Path, billing: dict[str, Any]) -> None:
    gw = GatewayThread(_config(billing), tmp_path).start()
    try:
        _limit(gw)
        key = gw.create_key("alpha", app="support")
        body = chat("What does the enterprise plan cost per seat?")
        miss = post(gw.base_url, key, body)
        after_miss = _spent(gw)
        exact = post(gw.base_url, key, body)
        semantic = post(gw.base_url, key, chat("What is the enterprise plan cost per seat?"))
        assert miss.status_code == exact.status_code == semantic.status_code == 200
        assert exact.headers["x-tokenplane-cache"] == "exact"
        assert semantic.headers["x-tokenplane-cache"] == "semantic"
        spent = _spent(gw)
    finally:
        gw.stop()
    rows = gw.ledger_rows()
    assert len(rows) == 3 and sum(1 for r in rows if r["cache"]) == 2
    hits = [r for r in rows if r["cache"]]
    if billing.get("mode") == "discounted":
        assert all(r["cost_micros"] > 0 for r in hits)  # the discount is billed ...
        assert spent["budget"][0] > after_miss["budget"][0]  # ... and the budget sees it
    else:  # a free hit: no money, and no tokens unless configured
        assert all(r["cost_micros"] == 0 for r in hits)
        assert spent["budget"][0] == after_miss["budget"][0]
        if "tokens" not in billing:
            assert spent["tokens_per_day"][0] == after_miss["tokens_per_day"][0]
    assert {name: spent[name][0] for name in ("rpm", "budget", "tokens_per_day")} \
        == _expected(rows, billing)
    assert all(reserved == 0 for _, reserved in spent.values())


def test_hits_settle_exactly_on_redis_shared_by_two_gateways(tmp_path: Path) -> None:
    billing = {"mode": "discounted", "charge": "0.3", "tokens": "saved"}
    with fresh_redis_prefix("cache-budget") as prefix:
        cfg = _config(billing, cache={"store": "redis", "key_prefix": prefix},
                      redis_url=REDIS_URL)
        cfg["admission"]["key_prefix"] = prefix + "adm:"
        one = GatewayThread(cfg, tmp_path / "one").start()
        two = GatewayThread(cfg, tmp_path / "two").start()
        try:
            _limit(one)
            _limit(two)
            k1 = one.create_key("alpha", app="support")
            k2 = two.create_key("alpha", app="support")
            questions = ["Where can I download my invoices?", "How do I add a teammate?",
                         "Can I pay by bank transfer?"]
            for q in questions:  # each answered on one replica, hit on the other
                assert "x-tokenplane-cache" not in post(one.base_url, k1, chat(q)).headers
                assert post(two.base_url, k2, chat(q)).headers["x-tokenplane-cache"] \
                    == "exact"
                assert post(one.base_url, k1, chat(q)).headers["x-tokenplane-cache"] \
                    == "exact"
            seen_by_one, seen_by_two = _spent(one), _spent(two)
        finally:
            one.stop()
            two.stop()
    assert seen_by_one == seen_by_two  # one shared counter
    rows = one.ledger_rows() + two.ledger_rows()
    assert len(rows) == 9 and sum(1 for r in rows if r["cache"]) == 6
    assert all(r["cost_micros"] > 0 and r["saved_cost_micros"] > 0
               for r in rows if r["cache"])
    assert {name: seen_by_one[name][0] for name in ("rpm", "budget", "tokens_per_day")} \
        == _expected(rows, billing)
    assert all(reserved == 0 for _, reserved in seen_by_one.values())
