"""Repeated, overlapping reads of the ledger count each request once, as its last
attempt."""

from __future__ import annotations

from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.feed import LedgerFeed
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules
from tokenplane.slo.tally import Tally
from tokenplane.slo.verdict import RequestFacts

SLO = Slo("avail", Selector(), (Sli(SliKind.AVAILABILITY),), 0.99, 86400.0,
          default_rules(86400.0, 0.99))


def facts(ts: float, code: int = 200) -> RequestFacts:
    return RequestFacts(ts=ts, model="m", tenant="t", department="", app="",
                        slo_class="", status="ok" if code == 200 else "error",
                        http_status=code, error_code=None, stream=False, ttft_s=None,
                        tpot_s=None, latency_s=1.0)


def test_rows_read_twice_count_once() -> None:
    ev = SloEvaluator([SLO])
    feed = LedgerFeed(ev, overlap_s=60)
    assert feed.since() is None
    first = [(f"r{i}", 0, facts(1000.0 + i)) for i in range(10)]
    assert feed.take(first) == 10
    assert feed.since() == 1009.0 - 60
    again = [*first[5:], ("r10", 0, facts(1010.0))]  # the overlap, and one new row
    assert feed.take(again) == 1
    assert ev.tally("avail", "availability").window(1011.0, 3600) == Tally(11, 0)


def test_a_later_attempt_replaces_the_failed_one() -> None:
    ev = SloEvaluator([SLO])
    feed = LedgerFeed(ev, overlap_s=60)
    feed.take([("r1", 0, facts(1000.0, 502))])  # read before the retry reached the ledger
    assert ev.tally("avail", "availability").window(1001.0, 3600) == Tally(1, 1)
    feed.take([("r1", 0, facts(1000.0, 502)), ("r1", 1, facts(1000.5))])
    assert ev.tally("avail", "availability").window(1001.0, 3600) == Tally(1, 0)
    feed.take([("r1", 0, facts(1000.0, 502))])  # an older attempt never comes back
    assert ev.tally("avail", "availability").window(1001.0, 3600) == Tally(1, 0)
