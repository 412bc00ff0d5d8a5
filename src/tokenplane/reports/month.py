"""Calendar months (UTC) as the reports name them: ``2026-11``."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True, slots=True)
class Month:
    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> Month:
        m = _MONTH.match(text.strip())
        if m is None or not 1 <= int(m.group(2)) <= 12 or int(m.group(1)) < 1970:
            raise ValueError(f"a month is YYYY-MM (such as 2026-11), not {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def start(self) -> float:
        return datetime(self.year, self.month, 1, tzinfo=UTC).timestamp()

    @property
    def end(self) -> float:
        return self.next().start

    @property
    def days(self) -> int:
        return calendar.monthrange(self.year, self.month)[1]

    def previous(self) -> Month:
        return Month(self.year - 1, 12) if self.month == 1 else Month(self.year, self.month - 1)

    def next(self) -> Month:
        return Month(self.year + 1, 1) if self.month == 12 else Month(self.year, self.month + 1)
