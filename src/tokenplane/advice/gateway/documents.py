"""Advice documents kept ready: stale-while-revalidate, one computation at a time.

The all-tenant document reads every tenant's day rollups (175k rows on the bench's
million-event ledger: 0.4-2 s), far longer than a page may take, and advice that
reads whole days does not change faster than a few minutes matter. So the gateway
answers from documents it keeps, each with the time it was made, and refreshes them
behind the answer:

- a document younger than ``fresh_s`` is answered as it is;
- an older one (up to ``stale_s``) is answered at once and recomputed in the
  background; the answer says its age and that a newer one is coming;
- none, or one older than ``stale_s``: the caller waits for the computation;
- a caller that needs what the ledger holds now (``made_after``; the route's
  ``Cache-Control: no-cache``) waits for a computation started after it asked.

One computation per document at a time: callers asking while it runs share it (a
caller that leaves does not cancel it). The ``pinned`` document (the admin's default
view) is computed when the gateway starts and again every ``keep_s`` by a background
task, so no view of it waits after the first computation; with ``saved`` (a file in
the data directory) each one is also written there, and a restart answers with the
saved one (if younger than ``stale_s``) while it computes the next. Documents nobody
asked for within ``stale_s`` are dropped, and at most ``max_kept`` are kept.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from tokenplane.periodic import Periodic

log = logging.getLogger("tokenplane.advice")

# the document's scope: (tenant or None for every tenant, since, until) as asked
Key = tuple[str | None, str, str]
# computes a document: (the time it was made, its JSON)
Compute = Callable[[Key], Awaitable[tuple[float, bytes]]]

FRESH_S = 60.0
STALE_S = 3600.0
KEEP_S = 300.0
MAX_KEPT = 64


@dataclass(frozen=True, slots=True)
class Served:
    """A document as answered: its JSON, when it was made, whether a newer one is
    being computed."""

    body: bytes
    made_at: float
    refreshing: bool


@dataclass(slots=True)
class _Entry:
    body: bytes | None = None
    made_at: float = 0.0
    asked_at: float = 0.0
    task: asyncio.Task[None] | None = None
    started_at: float = 0.0  # when the running computation started


class AdviceDocuments:
    def __init__(self, compute: Compute, *, clock: Callable[[], float] = time.time,
                 fresh_s: float = FRESH_S, stale_s: float = STALE_S,
                 keep_s: float = KEEP_S, pinned: Key | None = None,
                 saved: Path | None = None, max_kept: int = MAX_KEPT) -> None:
        self.compute = compute
        self.clock = clock
        self.fresh_s = fresh_s
        self.stale_s = stale_s
        self.pinned = pinned
        self.saved = saved if pinned is not None else None
        self.max_kept = max_kept
        self._entries: dict[Key, _Entry] = {}
        self._keeper = Periodic("advice-keeper", keep_s, self._keep, log=log,
                                failure="advice: refreshing the kept document failed",
                                first_now=True)

    async def start(self) -> None:
        """Load the saved pinned document, compute it now and keep it fresh."""
        if self.pinned is None:
            return
        if self.saved is not None:
            try:
                found = await asyncio.to_thread(_load, self.saved)
            except (OSError, ValueError) as exc:
                log.warning("advice: cannot read the saved document %s: %s", self.saved, exc)
                found = None
            if found is not None and self.clock() - found[0] < self.stale_s:
                self._entries[self.pinned] = _Entry(found[1], found[0], self.clock())
        self._keeper.start()

    async def close(self) -> None:
        await self._keeper.close()
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def get(self, key: Key, *, made_after: float | None = None) -> Served:
        """The document for ``key``: kept, or computed (see the module's rules);
        ``made_after``: one whose computation started then or later (waits for it)."""
        now = self.clock()
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(asked_at=now)
            self._drop_unasked(now)
        entry.asked_at = now
        if made_after is not None:
            # the running computation may have read the ledger before made_after: then
            # one more (the loop ends: a new computation starts at made_after or later)
            while entry.body is None or entry.made_at < made_after:
                await asyncio.shield(self.refresh(key))
            return Served(entry.body, entry.made_at, entry.task is not None)
        if entry.body is not None:
            age = now - entry.made_at
            if age < self.fresh_s:
                return Served(entry.body, entry.made_at, entry.task is not None)
            if age < self.stale_s:
                self.refresh(key)
                return Served(entry.body, entry.made_at, True)
        await asyncio.shield(self.refresh(key))
        assert entry.body is not None  # the computation stored it, or raised
        return Served(entry.body, entry.made_at, entry.task is not None)

    def refresh(self, key: Key) -> asyncio.Task[None]:
        """The computation of ``key``'s document: the running one, or a new one."""
        entry = self._entries.setdefault(key, _Entry(asked_at=self.clock()))
        if entry.task is None:
            entry.started_at = self.clock()
            entry.task = asyncio.get_running_loop().create_task(
                self._compute(key, entry), name=f"advice {key}")
            entry.task.add_done_callback(_retrieve)
        return entry.task

    def pending(self, key: Key) -> float | None:
        """None if ``key`` has a kept document to answer with (``get`` will not wait
        unless it is older than ``stale_s``); else its computation is started (if it
        was not running) and the time it started is returned."""
        now = self.clock()
        entry = self._entries.get(key)
        if entry is not None and entry.body is not None and now - entry.made_at < self.stale_s:
            return None
        if entry is None:
            entry = self._entries[key] = _Entry(asked_at=now)
            self._drop_unasked(now)
        entry.asked_at = now
        self.refresh(key)
        return entry.started_at

    def age(self, key: Key) -> float | None:
        """Seconds since ``key``'s kept document was made (None: none kept)."""
        entry = self._entries.get(key)
        return None if entry is None or entry.body is None else self.clock() - entry.made_at

    async def _compute(self, key: Key, entry: _Entry) -> None:
        try:
            made_at, body = await self.compute(key)
            if made_at >= entry.made_at:  # never replace a newer document
                entry.body, entry.made_at = body, made_at
                if key == self.pinned and self.saved is not None:
                    try:
                        await asyncio.to_thread(_save, self.saved, made_at, body)
                    except OSError as exc:
                        log.warning("advice: cannot save the document %s: %s",
                                    self.saved, exc)
        finally:
            entry.task = None

    async def _keep(self) -> None:
        assert self.pinned is not None
        await asyncio.shield(self.refresh(self.pinned))

    def _drop_unasked(self, now: float) -> None:
        for key in [k for k, e in self._entries.items()
                    if k != self.pinned and e.task is None and now - e.asked_at >= self.stale_s]:
            del self._entries[key]
        while len(self._entries) > self.max_kept:
            idle = [(e.asked_at, k) for k, e in self._entries.items()
                    if k != self.pinned and e.task is None]
            if not idle:
                break
            del self._entries[min(idle)[1]]


def _save(path: Path, made_at: float, body: bytes) -> None:
    """The document and when it was made (first line), replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(b"%r\n" % made_at + body)
    os.replace(tmp, path)


def _load(path: Path) -> tuple[float, bytes] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    head, _, body = raw.partition(b"\n")
    if not body.startswith(b"{"):
        raise ValueError("not a saved advice document")
    return float(head), body


def _retrieve(task: asyncio.Task[None]) -> None:
    """A background computation's failure is logged, not left unretrieved."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("advice: computing a document failed", exc_info=task.exception())
