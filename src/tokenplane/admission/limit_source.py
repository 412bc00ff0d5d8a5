"""What admission needs of the limit store: the current table, kept fresh.

The metadata database (``tokenplane.meta``: SQLite or PostgreSQL) implements it; the
admission service only ever sees this protocol, so admission does not depend on a
database.
"""

from __future__ import annotations

from typing import Protocol

from tokenplane.admission.binding import LimitTable


class LimitSource(Protocol):
    table: LimitTable

    def refresh(self, now: float | None = None) -> bool:
        """Pick up limits another process changed (cheap: at most a stat or two);
        True when the table was reloaded."""

    def close(self) -> None: ...
