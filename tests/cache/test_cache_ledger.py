"""Cache hits in the ledger and the metrics: one event per hit with its kind, its
source request, the tokens and cost it saved, billed free or at the configured
discount; and a Redis store that two gateways share."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cache.harness import cache_config, chat, post
from tests.gateway.harness import GatewayThread
from tests.services import REDIS_URL, fresh_redis_prefix

# sim_config's prices per million tokens: input 0.10, output 0.40
PRICE_IN, PRICE_OUT = Decimal("0.10"), Decimal("0.40")


def _list_price_micros(prompt: int, output: int) -> int:
    return int((prompt * PRICE_IN + output * PRICE_OUT).to_integral_value())


@pytest.mark.parametrize("mode", ["free", "discounted"])
def test_hits_are_billed_and_recorded_as_savings(tmp_path: Path, mode: str) -> None:
    billing = {"mode": mode, "charge": "0.25"}
    cfg = cache_config({"billing": billing, "rules": [{"app": "support", "semantic": True}]})
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        key = gw.create_key("alpha", app="support")
        body = chat("What does the enterprise plan cost per seat?")
        src = post(gw.base_url, key, body)
        exact = post(gw.base_url, key, body)
        semantic = post(gw.base_url, key, chat("What is the enterprise plan cost per seat?"))
        assert exact.headers["x-tokenplane-cache"] == "exact"
        assert semantic.headers["x-tokenplane-cache"] == "semantic"
        usage = src.json()["usage"]
        text = httpx.get(f"{gw.base_url.removesuffix('/v1')}/metrics",
                         headers={"authorization": f"Bearer {gw.create_key('alpha', admin=True)}"}
                         ).text
    finally:
        gw.stop()
    rows = {r["request_id"]: r for r in gw.ledger_rows()}
    source = rows[src.headers["x-request-id"]]
    assert source["cache"] is None and source["input_tokens"] == usage["prompt_tokens"]
    for resp, kind in ((exact, "exact"), (semantic, "semantic")):
        row = rows[resp.headers["x-request-id"]]
        assert row["cache"] == kind
        assert row["cache_source_request_id"] == src.headers["x-request-id"]
        assert row["input_tokens"] == 0 and row["output_tokens"] == 0  # nothing upstream
        assert row["saved_output_tokens"] == usage["completion_tokens"]
        assert row["saved_input_tokens"] > 0
        full = _list_price_micros(row["saved_input_tokens"], row["saved_output_tokens"])
        charged = 0 if mode == "free" else int(
            (Decimal(full) * Decimal("0.25")).to_integral_value())
        assert abs(row["cost_micros"] - charged) <= 1
        assert row["cost_micros"] + row["saved_cost_micros"] == full
    exact_row = rows[exact.headers["x-request-id"]]
    assert exact_row["saved_input_tokens"] == usage["prompt_tokens"]
    series = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for fam in text_string_to_metric_families(text) for s in fam.samples}
    def val(name: str, **labels: str) -> float:
        return series.get((name, tuple(sorted(labels.items()))), 0.0)
    assert val("tokenplane_cache_requests_total", kind="exact", result="hit", tenant="alpha") == 1
    assert val("tokenplane_cache_requests_total", kind="exact", result="miss",
               tenant="alpha") == 2
    assert val("tokenplane_cache_requests_total", kind="semantic", result="hit",
               tenant="alpha") == 1
    assert val("tokenplane_cache_saved_tokens_total", kind="exact", direction="output",
               tenant="alpha") == usage["completion_tokens"]


def test_redis_store_is_shared_by_two_gateways(tmp_path: Path) -> None:
    with fresh_redis_prefix("cache") as prefix:
        cfg = cache_config({"store": "redis", "key_prefix": prefix,
                            "rules": [{"app": "support", "semantic": True}]},
                           redis_url=REDIS_URL)
        cfg["admission"] = {"key_prefix": prefix + "adm:"}
        one = GatewayThread(cfg, tmp_path / "one").start()
        two = GatewayThread(cfg, tmp_path / "two").start()
        try:
            k1 = one.create_key("alpha", app="support")
            k2 = two.create_key("alpha", app="support")
            kb = two.create_key("beta", app="support")
            body = chat("Where can I download my invoices?")
            src = post(one.base_url, k1, body)
            exact = post(two.base_url, k2, body)
            assert exact.headers["x-tokenplane-cache"] == "exact"
            assert exact.headers["x-tokenplane-cache-source"] == src.headers["x-request-id"]
            assert exact.content == src.content
            near = post(two.base_url, k2, chat("Where do I download my invoices?"))
            assert near.headers["x-tokenplane-cache"] == "semantic"
            assert "x-tokenplane-cache" not in post(two.base_url, kb, body).headers
            # a second fill on gateway two reaches gateway one's mirror incrementally
            post(two.base_url, k2, chat("How do I add a teammate?"))
            assert post(one.base_url, k1, chat("How can I add a teammate?")).headers[
                "x-tokenplane-cache"] == "semantic"
            admin = one.create_key("alpha", admin=True)
            root = one.base_url.removesuffix("/v1")
            auth = {"authorization": f"Bearer {admin}"}
            other_app = httpx.delete(f"{root}/admin/v1/cache", headers=auth,
                                     params={"tenant": "alpha", "app": "wiki"})
            assert other_app.status_code == 200
            assert post(two.base_url, k2, body).headers["x-tokenplane-cache"] == "exact"
            done = httpx.delete(f"{root}/admin/v1/cache", params={"tenant": "alpha"},
                                headers=auth)
            assert done.status_code == 200 and done.json()["removed"] >= 2
            # gone for every replica, exact and semantic; beta's entries stay
            assert "x-tokenplane-cache" not in post(two.base_url, k2, body).headers
            assert "x-tokenplane-cache" not in post(
                one.base_url, k1, chat("How can I add a teammate?")).headers
            assert post(one.base_url, one.create_key("beta", app="support"), body).headers[
                "x-tokenplane-cache"] == "exact"
        finally:
            one.stop()
            two.stop()
