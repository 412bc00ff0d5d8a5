"""The kept advice documents (stale-while-revalidate): what is answered at once, what
waits, one computation at a time, the pinned document computed without being asked.
The computation is a stand-in that waits on an event the test sets, so each test
sees exactly which answers waited for it; the clock is the test's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tokenplane.advice.gateway.documents import AdviceDocuments, Key

KEY: Key = (None, "30d", "")
OTHER: Key = ("acme", "30d", "")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Computation:
    """Counts computations; each waits for ``release`` (set: they run through)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started: list[Key] = []
        self.release = asyncio.Event()
        self.release.set()
        self.running = asyncio.Event()
        self.fail = False

    async def __call__(self, key: Key) -> tuple[float, bytes]:
        made = self.clock()
        self.started.append(key)
        self.running.set()
        await self.release.wait()
        self.running.clear()
        if self.fail:
            raise RuntimeError("ledger unavailable")
        return made, b'{"n":%d}' % len(self.started)


def _docs(clock: Clock, comp: Computation, **kw: object) -> AdviceDocuments:
    return AdviceDocuments(comp, clock=clock, fresh_s=60, stale_s=3600, keep_s=300,
                           **kw)  # type: ignore[arg-type]


async def test_the_first_ask_waits_and_concurrent_asks_share_one_computation() -> None:
    clock = Clock()
    comp = Computation(clock)
    comp.release.clear()
    docs = _docs(clock, comp)
    asks = [asyncio.create_task(docs.get(KEY)) for _ in range(3)]
    await comp.running.wait()
    assert not any(a.done() for a in asks)  # nothing kept yet: they wait
    comp.release.set()
    served = await asyncio.gather(*asks)
    assert comp.started == [KEY]
    assert {s.body for s in served} == {b'{"n":1}'} and served[0].made_at == 1000.0


async def test_a_fresh_document_is_answered_from_memory() -> None:
    clock = Clock()
    comp = Computation(clock)
    docs = _docs(clock, comp)
    await docs.get(KEY)
    clock.now += 59
    served = await docs.get(KEY)
    assert served.body == b'{"n":1}' and not served.refreshing
    assert comp.started == [KEY]
    assert docs.age(KEY) == 59 and docs.age(OTHER) is None


async def test_a_stale_document_is_answered_at_once_and_refreshed_behind() -> None:
    clock = Clock()
    comp = Computation(clock)
    docs = _docs(clock, comp)
    await docs.get(KEY)
    clock.now += 61
    comp.release.clear()  # the refresh cannot finish until the test says so
    served = await docs.get(KEY)  # answered while the refresh is held
    assert served.body == b'{"n":1}' and served.refreshing and served.made_at == 1000.0
    await comp.running.wait()
    again = await docs.get(KEY)  # still the old one, the same refresh
    assert again.body == b'{"n":1}' and again.refreshing
    assert comp.started == [KEY, KEY]
    comp.release.set()
    await docs.refresh(KEY)
    assert comp.started == [KEY, KEY]  # that was the same computation
    newer = await docs.get(KEY)
    assert newer.body == b'{"n":2}' and newer.made_at == 1061.0 and not newer.refreshing


async def test_a_document_past_stale_is_computed_while_the_caller_waits() -> None:
    clock = Clock()
    comp = Computation(clock)
    docs = _docs(clock, comp)
    await docs.get(KEY)
    clock.now += 3600
    comp.release.clear()
    ask = asyncio.create_task(docs.get(KEY))
    await comp.running.wait()
    assert not ask.done()
    comp.release.set()
    assert (await ask).body == b'{"n":2}'


async def test_made_after_waits_for_a_computation_that_started_later() -> None:
    clock = Clock()
    comp = Computation(clock)
    docs = _docs(clock, comp)
    await docs.get(KEY)
    clock.now += 10  # fresh, but the caller wants what the ledger holds now
    served = await docs.get(KEY, made_after=clock.now)
    assert served.body == b'{"n":2}' and served.made_at == 1010.0
    # a computation already running from before the ask is not enough: one more
    clock.now += 100
    comp.release.clear()
    behind = await docs.get(KEY)  # stale: starts a refresh at 1110
    assert behind.refreshing
    await comp.running.wait()
    clock.now += 1
    ask = asyncio.create_task(docs.get(KEY, made_after=clock.now))
    comp.release.set()
    served = await ask
    assert served.made_at == 1111.0 and served.body == b'{"n":4}'


async def test_a_failed_refresh_keeps_the_old_document() -> None:
    clock = Clock()
    comp = Computation(clock)
    docs = _docs(clock, comp)
    await docs.get(KEY)
    clock.now += 61
    comp.fail = True
    assert (await docs.get(KEY)).body == b'{"n":1}'
    with pytest.raises(RuntimeError):
        await docs.refresh(KEY)
    assert (await docs.get(KEY)).body == b'{"n":1}'  # and a new refresh is tried
    comp.fail = False
    await docs.refresh(KEY)
    assert (await docs.get(KEY)).body == b'{"n":3}'


async def test_a_caller_that_leaves_does_not_cancel_the_computation() -> None:
    clock = Clock()
    comp = Computation(clock)
    comp.release.clear()
    docs = _docs(clock, comp)
    ask = asyncio.create_task(docs.get(KEY))
    await comp.running.wait()
    ask.cancel()
    with pytest.raises(asyncio.CancelledError):
        await ask
    comp.release.set()
    await docs.refresh(KEY)
    assert (await docs.get(KEY)).body == b'{"n":1}' and comp.started == [KEY]


async def test_the_pinned_document_is_computed_at_start_without_an_ask() -> None:
    clock = Clock()
    comp = Computation(clock)
    comp.release.clear()
    docs = _docs(clock, comp, pinned=KEY)
    await docs.start()
    await comp.running.wait()
    running = docs.refresh(KEY)  # the keeper's computation, not a new one
    comp.release.set()
    await running
    assert comp.started == [KEY] and docs.age(KEY) == 0
    assert (await docs.get(KEY)).body == b'{"n":1}' and comp.started == [KEY]
    await docs.close()


async def test_documents_nobody_asks_for_are_dropped() -> None:
    clock = Clock()
    comp = Computation(clock)
    docs = _docs(clock, comp, pinned=KEY, max_kept=2)
    await docs.get(KEY)
    await docs.get(OTHER)
    clock.now += 3600
    await docs.get(("globex", "7d", ""))  # OTHER was not asked for an hour
    assert docs.age(OTHER) is None and docs.age(KEY) is not None
    await docs.get(("initech", "7d", ""))  # over max_kept: the least recently asked goes
    assert docs.age(("globex", "7d", "")) is None and docs.age(KEY) is not None


async def test_a_restart_answers_with_the_saved_document_while_it_computes(
        tmp_path: Path) -> None:
    clock = Clock()
    comp = Computation(clock)
    saved = tmp_path / "advice" / "default.json"
    docs = _docs(clock, comp, pinned=KEY, saved=saved)
    await docs.start()
    await docs.refresh(KEY)  # the keeper's first computation, saved
    await docs.close()
    assert saved.read_bytes().endswith(b'{"n":1}')
    clock.now += 600  # restarted ten minutes later
    comp2 = Computation(clock)
    comp2.release.clear()
    again = _docs(clock, comp2, pinned=KEY, saved=saved)
    await again.start()
    await comp2.running.wait()  # computing the next one...
    served = await again.get(KEY)  # ...while the saved one is answered at once
    assert served.body == b'{"n":1}' and served.made_at == 1000.0 and served.refreshing
    comp2.release.set()
    await again.refresh(KEY)
    assert (await again.get(KEY)).body == b'{"n":1}'  # comp2's first: n counts per stand-in
    assert (await again.get(KEY)).made_at == 1600.0
    await again.close()
    clock.now += 3600  # a saved document past stale_s is not answered
    comp3 = Computation(clock)
    comp3.release.clear()
    late = _docs(clock, comp3, pinned=KEY, saved=saved)
    await late.start()
    ask = asyncio.create_task(late.get(KEY))
    await comp3.running.wait()
    assert not ask.done()
    comp3.release.set()
    assert (await ask).made_at == 5200.0
    await late.close()


async def test_pending_starts_the_computation_and_says_since_when() -> None:
    clock = Clock()
    comp = Computation(clock)
    comp.release.clear()
    docs = _docs(clock, comp)
    assert docs.pending(KEY) == 1000.0  # nothing kept: started now
    await comp.running.wait()
    clock.now += 2
    assert docs.pending(KEY) == 1000.0 and comp.started == [KEY]  # the same one
    comp.release.set()
    await docs.refresh(KEY)
    assert docs.pending(KEY) is None  # kept: get answers at once
    clock.now += 3600  # too old to answer with: computed again
    assert docs.pending(KEY) == 4602.0
    await docs.refresh(KEY)
    assert docs.pending(KEY) is None and comp.started == [KEY, KEY]
