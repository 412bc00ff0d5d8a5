"""Sealed minutes (issue 14, evaluation at scale): a rebuild loads the SLIs' sealed
one-minute counts from the ledger database and reads raw rows only since the last
sealed minute, with exactly the counts of a full read; a changed definition starts
afresh; a retry straddling the seal is counted once. Real SQLite and PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.services import fresh_pg_schema
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.gateway.minutes_store import MinuteStore
from tokenplane.slo.gateway.service import SloService
from tokenplane.slo.minutes import MinuteBook, definition_key
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules
from tokenplane.slo.verdict import RequestFacts

DAY = 86400.0
T0 = 1_790_000_000.0  # a minute boundary
SLO = Slo("chat", Selector(model="m"), (Sli(SliKind.AVAILABILITY), Sli(SliKind.TTFT, 1.0)),
          0.99, DAY, default_rules(DAY, 0.99))


def _event(i: int, ts: float, *, code: int = 200, ttft: float = 0.3,
           attempt: int = 0, rid: str | None = None) -> UsageEvent:
    ok = code == 200
    return UsageEvent(
        request_id=rid or f"r{i}", attempt=attempt, ts=ts, tenant="t", model="m",
        status="ok" if ok else "error", http_status=code, stream=True,
        error_code=None if ok else "upstream_error", arrival_ts=ts - ttft - 0.5,
        upstream_start_ts=ts - ttft - 0.4, first_token_ts=ts - 0.5 if ok else None,
        last_token_ts=ts if ok else None, output_tokens=10 if ok else 0)


def _traffic(hours: float, seed: int = 3) -> list[UsageEvent]:
    """A request every 20 s for ``hours`` before T0 + hours: some fail, some are slow,
    and a few fail and are retried seconds later (the later attempt counts)."""
    rng = random.Random(seed)
    out = []
    n = int(hours * 180)
    for i in range(n):
        ts = T0 + i * 20.0 + rng.random()
        roll = rng.random()
        if roll < 0.03:
            out.append(_event(i, ts, code=502))
            out.append(_event(i, ts + 4.0, attempt=1, rid=f"r{i}"))
        elif roll < 0.05:
            out.append(_event(i, ts, code=503))
        elif roll < 0.10:
            out.append(_event(i, ts, ttft=2.5))
        else:
            out.append(_event(i, ts))
    return out


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def _service(sink: LedgerSink, clock: Clock, *, minutes: bool = True,
                   slos: tuple[Slo, ...] = (SLO,)) -> SloService:
    svc = SloService(list(slos), lambda: sink, clock=clock,
                     minutes=MinuteStore(lambda: sink) if minutes else None)
    await svc.refresh()
    return svc


def _statuses(svc: SloService, now: float) -> list[dict[str, object]]:
    return [s.as_dict() for s in svc.status(now)]


@pytest.fixture(params=["sqlite", "postgres"])
def sink_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("minutes") / "ledger.db")
    else:
        with fresh_pg_schema("minutes") as url:
            yield url


async def test_a_rebuild_from_sealed_minutes_equals_a_full_read(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        await sink.write(_traffic(6))
        clock = Clock(T0 + 6 * 3600 + 30)
        first = await _service(sink, clock)  # reads the whole window, seals 5 hours
        assert first.raw_from == clock.now - DAY
        stored = await sink.fetch("SELECT COUNT(*) AS n, MAX(minute) AS last "
                                  "FROM slo_minutes")
        assert stored[0]["n"] > 0
        assert int(stored[0]["last"]) == first.book.sealed_before(clock.now, 60.0) - 1
        full = await _service(sink, clock, minutes=False)
        again = await _service(sink, clock)  # a restart: sealed minutes, then raw rows
        assert again.raw_from is not None
        assert clock.now - 3600 - 60 <= again.raw_from <= clock.now - 3600
        assert _statuses(again, clock.now) == _statuses(full, clock.now)
        assert _statuses(first, clock.now) == _statuses(full, clock.now)
        bad = [s for s in _statuses(full, clock.now) if int(str(s["bad"])) > 0]
        assert len(bad) == 2  # the traffic has failures and slow answers: not vacuous
    finally:
        await sink.close()


async def test_rounds_keep_sealing_and_later_rebuilds_stay_exact(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        events = _traffic(5)
        clock = Clock(T0 + 3 * 3600)
        await sink.write([e for e in events if e.ts < clock.now - 1])
        svc = await _service(sink, clock)
        for step in range(1, 5):  # half an hour at a time, new rows arriving
            clock.now = T0 + 3 * 3600 + step * 1800
            await sink.write([e for e in events
                              if clock.now - 1800 - 1 <= e.ts < clock.now - 1])
            await svc.refresh()
        full = await _service(sink, clock, minutes=False)
        restarted = await _service(sink, clock)
        assert restarted.raw_from is not None and restarted.raw_from > clock.now - 2 * 3600
        assert _statuses(restarted, clock.now) == _statuses(full, clock.now)
        assert _statuses(svc, clock.now) == _statuses(full, clock.now)
    finally:
        await sink.close()


async def test_a_changed_definition_reads_the_whole_window_again(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        await sink.write(_traffic(3))
        clock = Clock(T0 + 3 * 3600)
        await _service(sink, clock)
        stricter = Slo("chat", SLO.selector, (Sli(SliKind.AVAILABILITY), Sli(SliKind.TTFT, 0.5)),
                       0.99, DAY, default_rules(DAY, 0.99))
        assert definition_key(stricter, stricter.slis[1]) != definition_key(SLO, SLO.slis[1])
        changed = await _service(sink, clock, slos=(stricter,))
        assert changed.raw_from == clock.now - DAY  # the new TTFT threshold has no minutes
        full = await _service(sink, clock, minutes=False, slos=(stricter,))
        assert _statuses(changed, clock.now) == _statuses(full, clock.now)
        looser = Slo("chat", SLO.selector, SLO.slis, 0.95, DAY, default_rules(DAY, 0.95))
        kept = await _service(sink, clock, slos=(looser,))  # objective only: minutes kept
        assert kept.raw_from is not None and kept.raw_from > clock.now - 2 * 3600
    finally:
        await sink.close()


def _facts(ts: float, code: int = 200) -> RequestFacts:
    return RequestFacts(ts=ts, model="m", tenant="t", department="", app="", slo_class="",
                        status="ok" if code == 200 else "error", http_status=code,
                        error_code=None, stream=True, ttft_s=0.2 if code == 200 else None,
                        tpot_s=None, latency_s=None)


def test_sealing_marks_quiet_slis_and_resume_takes_the_oldest() -> None:
    quiet = Slo("quiet", Selector(model="other"), (Sli(SliKind.AVAILABILITY),), 0.99, DAY,
                default_rules(DAY, 0.99))
    ev = SloEvaluator([SLO, quiet])
    for i in range(10):
        ev.observe(_facts(T0 + 60 * i, 200 if i % 3 else 503))
    book = MinuteBook([SLO, quiet], seal_s=3600)
    start, end = int(T0 // 60), int(T0 // 60) + 20
    sealed = list(book.to_seal(ev, start, end))
    marks = [m for m in sealed if m.valid == 0]
    assert {(m.slo, m.minute) for m in marks} == {("chat", end - 1), ("quiet", end - 1)}
    assert sum(m.bad for m in sealed if m.sli == "availability") == 4
    assert book.resume(sealed) == end
    assert book.resume([m for m in sealed if m.slo == "chat"]) is None  # quiet has none
    fresh = SloEvaluator([SLO, quiet])
    # the first five minutes: availability counts each; TTFT only the three whose
    # request succeeded (a failed request has no first token: not valid for TTFT)
    assert book.load(fresh, sealed, before=start + 5) == 5 + 3
    assert fresh.tally("chat", "availability").window(T0 + 3600, DAY).valid == 5
