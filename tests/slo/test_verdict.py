"""Which requests count for each SLI, and which are good."""

from __future__ import annotations

import pytest

from tokenplane.metering.events import UsageEvent
from tokenplane.slo.facts import facts_from_event
from tokenplane.slo.spec import Sli, SliKind
from tokenplane.slo.verdict import RequestFacts, Verdict, judge

AVAIL = Sli(SliKind.AVAILABILITY)
TTFT = Sli(SliKind.TTFT, 1.0)
TPOT = Sli(SliKind.TPOT, 0.05)
LATENCY = Sli(SliKind.LATENCY, 5.0)


def facts(**kw: object) -> RequestFacts:
    base: dict[str, object] = dict(
        ts=100.0, model="m", tenant="t", department="", app="", slo_class="interactive",
        status="ok", http_status=200, error_code=None, stream=True, ttft_s=0.5,
        tpot_s=0.02, latency_s=3.0,
    )
    base.update(kw)
    return RequestFacts(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw,verdict", [
    ({}, Verdict.GOOD),
    ({"status": "error", "http_status": 502, "error_code": "upstream_error"}, Verdict.BAD),
    ({"status": "error", "http_status": 504}, Verdict.BAD),
    ({"status": "error", "http_status": 503, "error_code": "overloaded"}, Verdict.BAD),
    ({"status": "error", "http_status": 500}, Verdict.BAD),
    ({"status": "error", "http_status": 429, "error_code": "upstream_rate_limited"},
     Verdict.BAD),
    # a limit or budget of ours: not the service failing
    ({"status": "error", "http_status": 429, "error_code": "rate_limit_exceeded"},
     Verdict.NOT_VALID),
    ({"status": "error", "http_status": 400, "error_code": "invalid_value"},
     Verdict.NOT_VALID),
    ({"status": "error", "http_status": 404, "error_code": "model_not_found"},
     Verdict.NOT_VALID),
    ({"status": "cancelled", "http_status": 499}, Verdict.NOT_VALID),
])
def test_availability(kw: dict[str, object], verdict: Verdict) -> None:
    assert judge(AVAIL, facts(**kw)) is verdict


def test_latency_slis_count_only_successes() -> None:
    failed = facts(status="error", http_status=502, ttft_s=3.0)
    for sli in (TTFT, TPOT, LATENCY):
        assert judge(sli, failed) is Verdict.NOT_VALID
    assert judge(TTFT, facts(ttft_s=1.0)) is Verdict.GOOD  # at the threshold is good
    assert judge(TTFT, facts(ttft_s=1.01)) is Verdict.BAD
    assert judge(TTFT, facts(stream=False)) is Verdict.NOT_VALID
    assert judge(TTFT, facts(ttft_s=None)) is Verdict.NOT_VALID
    assert judge(TPOT, facts(tpot_s=0.06)) is Verdict.BAD
    assert judge(TPOT, facts(tpot_s=None)) is Verdict.NOT_VALID
    assert judge(LATENCY, facts(stream=True)) is Verdict.NOT_VALID
    assert judge(LATENCY, facts(stream=False, latency_s=4.0)) is Verdict.GOOD
    assert judge(LATENCY, facts(stream=False, latency_s=6.0)) is Verdict.BAD


def test_facts_from_a_usage_event() -> None:
    ev = UsageEvent(
        request_id="r", attempt=0, ts=110.0, tenant="acme", model="m", stream=True,
        arrival_ts=100.0, first_token_ts=100.8, last_token_ts=102.8, output_tokens=41,
    )
    f = facts_from_event(ev, "interactive")
    assert f.ttft_s == pytest.approx(0.8)
    assert f.tpot_s == pytest.approx(0.05)
    assert f.latency_s == pytest.approx(10.0)
    assert (f.tenant, f.slo_class) == ("acme", "interactive")
    one_token = facts_from_event(UsageEvent(
        request_id="r", attempt=0, ts=1.0, arrival_ts=0.5, first_token_ts=0.7,
        last_token_ts=0.7, output_tokens=1))
    assert one_token.tpot_s is None
