"""A model of streaming clients for the property tests: an oracle of what was billed.

Clients follow the post-debit protocol with granularity G: reserve prompt +
predicted output, forward tokens one at a time, and after every G tokens beyond
what is covered call ``debit(G)``; a refusal ends the stream (the last G forwarded
tokens stay unpaid until reconcile). The oracle keeps the billed entries exactly as
docs/ADMISSION.md defines them, independently of the stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenplane.admission import Admission, Amounts, Denial, Grant, Scope


@dataclass
class Stream:
    grant: Grant
    prompt: int
    actual: int
    covered: int
    generated: int = 0
    cut: bool = False


@dataclass
class Oracle:
    """Billed entries ``[t_ms, amount, rid]`` of one total-token limit."""

    window_ms: int
    entries: list[list[object]] = field(default_factory=list)

    def add(self, t_ms: int, amount: int, rid: str) -> None:
        if amount > 0:
            self.entries.append([t_ms, amount, rid])

    def refund(self, rid: str, amount: int, now_ms: int) -> None:
        for e in self.entries:
            if e[2] == rid and int(str(e[0])) > now_ms - self.window_ms:
                back = min(amount, int(str(e[1])))
                e[1] = int(str(e[1])) - back
                return

    def in_window(self, end_ms: int) -> int:
        return sum(int(str(a)) for t, a, _ in self.entries
                   if end_ms - self.window_ms < int(str(t)) <= end_ms)

    def worst_window(self) -> int:
        ends = {int(str(t)) for t, _, _ in self.entries}
        return max((self.in_window(t) for t in ends), default=0)


@dataclass
class Clients:
    admission: Admission
    scopes: list[Scope]
    granularity: int
    oracle: Oracle
    limit: int
    streams: list[Stream] = field(default_factory=list)
    denials: list[tuple[Denial, int]] = field(default_factory=list)
    max_inflight: int = 0
    billed: int = 0

    async def start(self, prompt: int, predicted: int, actual: int, now: float) -> None:
        n = prompt + predicted
        got = await self.admission.reserve(
            self.scopes, Amounts(1, prompt, predicted), now)
        if isinstance(got, Denial):
            self.denials.append((got, n))
            return
        # Granted only if it fit within the limit in the window ending now.
        assert self.oracle.in_window(int(now * 1000)) + n <= self.limit
        self.oracle.add(int(now * 1000), n, got.reservation_id)
        self.streams.append(Stream(got, prompt, actual, predicted))
        self.max_inflight = max(self.max_inflight, len(self.streams))

    async def generate(self, index: int, tokens: int, now: float) -> None:
        if not self.streams:
            return
        s = self.streams[index % len(self.streams)]
        g = self.granularity
        for _ in range(tokens):
            if s.cut or s.generated >= s.actual:
                return
            s.generated += 1
            if s.generated - s.covered >= g:
                r = await self.admission.debit(s.grant, g, now)
                fits = self.oracle.in_window(int(now * 1000)) + g <= self.limit
                assert r.ok == fits
                if r.ok:
                    s.covered += g
                    self.oracle.add(int(now * 1000), g, f"{s.grant.reservation_id}#d")
                else:
                    s.cut = True

    async def finish(self, index: int, now: float) -> None:
        if not self.streams:
            return
        s = self.streams.pop(index % len(self.streams))
        used = s.prompt + s.generated
        granted = s.prompt + s.covered
        await self.admission.reconcile(s.grant, Amounts(1, s.prompt, s.generated), now)
        now_ms = int(now * 1000)
        if used > granted:
            self.oracle.add(now_ms, used - granted, s.grant.reservation_id + "#x")
        elif used < granted:
            self.oracle.refund(s.grant.reservation_id, granted - used, now_ms)
        self.billed += used
