"""The filter of an audit search (tenant, key, app, verdict, time window), shared by the
full scan (``multi.matching``) and the newest-first reader (``recent``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """``tenant`` None means every tenant: only for an operator (an admin key, the
    CLI). ``requests_only`` False also passes checkpoints (when ``tenant`` is None).
    ``admin_actions``: also the ``kind: admin`` records (governance/audit/admin_action)."""

    tenant: str | None = None
    key_id: str | None = None
    since: float | None = None
    until: float | None = None
    verdict: str | None = None
    requests_only: bool = True
    app: str | None = None
    admin_actions: bool = False
    requests: bool = True  # False with admin_actions: the admin actions alone

    def accepts(self, rec: dict[str, Any]) -> bool:
        """The exact test, on a parsed record."""
        kind = rec.get("kind")
        if kind == "admin" and self.admin_actions:
            if self.tenant is not None and rec.get("tenant") != self.tenant:
                return False
        elif kind != "request":
            if self.requests_only or self.tenant is not None:
                return False
        elif not self.requests or (self.tenant is not None and rec.get("tenant") != self.tenant):
            return False
        if self.key_id is not None and rec.get("key_id") != self.key_id:
            return False
        if self.verdict is not None and rec.get("verdict") != self.verdict:
            return False
        if self.app is not None and rec.get("app") != self.app:
            return False
        ts = rec.get("ts")
        if not isinstance(ts, int | float):
            return False
        return not ((self.since is not None and ts < self.since)
                    or (self.until is not None and ts >= self.until))

    def needles(self) -> tuple[bytes, ...]:
        """Byte strings every accepted record's line contains: the JSON strings of the
        values asked for (``"request"``, ``"acme"``), so a line without one of them is
        skipped unparsed. A superset test only (``accepts`` decides); it holds for any
        key order or spacing, as long as the values are not written with gratuitous
        ``\\u`` escapes (the writer's orjson never does that for printable text)."""
        out = [orjson.dumps(v) for v in (self.verdict, self.key_id, self.app, self.tenant)
               if v is not None]
        if not self.admin_actions and (self.requests_only or self.tenant is not None):
            out.append(b'"request"')  # in almost every line: last
        return tuple(out)
