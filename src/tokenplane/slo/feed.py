"""Feeding an evaluator from repeated reads of the ledger, each request once.

The ledger is read again and again from a watermark minus an overlap (rows of one
moment reach it at different times: each worker's flusher, a dead worker's journal
replayed by a sibling). ``LedgerFeed`` remembers the requests of the overlap, so a row
read twice counts once, and a later attempt of a request (a retry after a failure)
replaces the attempt counted before: a request counts as what the client finally got.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.verdict import RequestFacts


class LedgerFeed:
    def __init__(self, evaluator: SloEvaluator, overlap_s: float) -> None:
        self.evaluator = evaluator
        self.overlap_s = overlap_s
        self.watermark: float | None = None  # the newest ts taken so far
        self._seen: dict[str, tuple[int, RequestFacts]] = {}

    def since(self) -> float | None:
        """Where the next read starts (None: read the whole window)."""
        return None if self.watermark is None else self.watermark - self.overlap_s

    def take(self, rows: Iterable[tuple[str, int, RequestFacts]]) -> int:
        """Count ``(request_id, attempt, facts)`` rows not counted yet; how many were."""
        taken = 0
        for request_id, attempt, facts in rows:
            prev = self._seen.get(request_id)
            if prev is not None:
                if prev[0] >= attempt:
                    continue
                self.evaluator.observe(prev[1], sign=-1)
            self.evaluator.observe(facts)
            self._seen[request_id] = (attempt, facts)
            taken += 1
            if self.watermark is None or facts.ts > self.watermark:
                self.watermark = facts.ts
        self._forget()
        return taken

    def _forget(self) -> None:
        """Drop the requests older than two overlaps: no read reaches them again."""
        if self.watermark is None:
            return
        edge = self.watermark - 2 * self.overlap_s
        if len(self._seen) > 1024:
            for rid in [r for r, (_, f) in self._seen.items() if f.ts < edge]:
                del self._seen[rid]
