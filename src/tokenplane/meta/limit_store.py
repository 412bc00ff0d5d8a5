"""Limits persisted in the data directory's metadata database (SQLite ``meta.db``).

One row per target scope (tenant, department, app, key, end user; optionally one
model alias) holding a :class:`ScopeLimits` as JSON. The gateway keeps a
:class:`LimitTable` built from the rows and rebuilds it when another process (the
CLI, another gateway's admin API) commits a change: at most every
``reload_s`` seconds a change of the database or WAL file's size or mtime prompts a
check of SQLite's ``PRAGMA data_version`` and a reload when it moved (no query per
request).

Scope ids are qualified so that they are unique across tenants (the table is shared
by every tenant of the gateway): ``department: <tenant>/<department>``, ``app:
<tenant>/<department>/<app>``, ``key: <key id>`` (globally unique), ``user:
<tenant>/<user>``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tokenplane.admission.binding import LimitTable
from tokenplane.admission.limits import LimitError, ScopeLimits
from tokenplane.admission.periods import Period
from tokenplane.admission.scopes import Scope, admission_parties
from tokenplane.meta.db_watch import DbChangeWatch

_SCHEMA = """
CREATE TABLE IF NOT EXISTS limits (
  tenant TEXT NOT NULL, department TEXT NOT NULL DEFAULT '', app TEXT NOT NULL DEFAULT '',
  key_id TEXT NOT NULL DEFAULT '', end_user TEXT NOT NULL DEFAULT '',
  model TEXT NOT NULL DEFAULT '', spec TEXT NOT NULL, updated_at REAL NOT NULL,
  PRIMARY KEY (tenant, department, app, key_id, end_user, model));
"""

LIMIT_FIELDS: tuple[str, ...] = (
    "rpm", "tpm", "tpm_unit", "tokens_per_day", "tokens_per_month", "budget_micros",
    "budget_period", "budget_resets_at", "max_concurrent", "max_tokens_in_flight",
)

MAX_LIMIT = 2**63 - 1  # what a database integer column holds
MAX_BUDGET = 10**12  # currency units; its micros fit MAX_LIMIT

_INT_FIELDS: tuple[str, ...] = (
    "rpm", "tpm", "tokens_per_day", "tokens_per_month", "budget_micros", "max_concurrent",
    "max_tokens_in_flight",
)


@dataclass(frozen=True, slots=True)
class LimitTarget:
    """Where a limit applies: the most specific level given (user > key > app >
    department > tenant); ``department`` also qualifies an app; ``model`` restricts
    it to one model alias."""

    tenant: str
    department: str | None = None
    app: str | None = None
    key_id: str | None = None
    user: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if not self.tenant:
            raise LimitError("a limit needs a tenant")

    @property
    def level(self) -> str:
        for name, value in (("user", self.user), ("key", self.key_id), ("app", self.app),
                            ("department", self.department)):
            if value:
                return name
        return "tenant"

    def scope(self) -> Scope:
        p = admission_parties(self.tenant, self.department, self.app, self.key_id, self.user)
        ident = {"user": p.user, "key": p.key, "app": p.app, "department": p.department,
                 "tenant": p.tenant}[self.level]
        assert ident is not None
        return Scope(self.level, ident, self.model or None)  # type: ignore[arg-type]

    def row(self) -> tuple[str, str, str, str, str, str]:
        return (self.tenant, self.department or "", self.app or "", self.key_id or "",
                self.user or "", self.model or "")

    def as_dict(self) -> dict[str, str | None]:
        return {"tenant": self.tenant, "department": self.department, "app": self.app,
                "key_id": self.key_id, "user": self.user, "model": self.model}


@dataclass(frozen=True, slots=True)
class LimitEntry:
    target: LimitTarget
    limits: ScopeLimits
    updated_at: float


def limits_to_dict(spec: ScopeLimits) -> dict[str, Any]:
    """Only the fields that are set (plus the budget's period when there is a budget)."""
    out: dict[str, Any] = {}
    for name in _INT_FIELDS:
        value = getattr(spec, name)
        if value is not None:
            out[name] = value
    if spec.tpm is not None:
        out["tpm_unit"] = spec.tpm_unit
    if spec.budget_micros is not None:
        out["budget_period"] = spec.budget_period.kind
        if spec.budget_period.resets_at:
            out["budget_resets_at"] = list(spec.budget_period.resets_at)
    return out


def limits_from_dict(data: Mapping[str, Any]) -> ScopeLimits:
    """Validated :class:`ScopeLimits`; unknown fields or bad values raise LimitError."""
    unknown = set(data) - set(LIMIT_FIELDS)
    if unknown:
        raise LimitError(f"unknown limit fields {sorted(unknown)}; known: {list(LIMIT_FIELDS)}")
    kw: dict[str, Any] = {k: data[k] for k in _INT_FIELDS if data.get(k) is not None}
    for k, v in kw.items():
        if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= MAX_LIMIT:
            raise LimitError(f"{k} must be between 0 and {MAX_LIMIT}, got {v}")
    if data.get("tpm_unit"):
        kw["tpm_unit"] = data["tpm_unit"]
    try:
        kind: Any = data.get("budget_period") or "monthly"
        resets = tuple(float(t) for t in data.get("budget_resets_at") or ())
        kw["budget_period"] = Period(kind, resets)
        return ScopeLimits(**kw)
    except (TypeError, ValueError) as exc:
        raise LimitError(str(exc)) from None


def _target(row: tuple[Any, ...]) -> LimitTarget:
    return LimitTarget(str(row[0]), *(str(v) if v else None for v in row[1:6]))


def merge_limits(current: ScopeLimits | None, changes: Mapping[str, Any]) -> ScopeLimits:
    """``changes`` merged into ``current`` (a ``None`` value removes that limit),
    validated: raises ``LimitError`` before anything is written."""
    merged = limits_to_dict(current) if current is not None else {}
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return limits_from_dict(merged)


class LimitStore:
    """Limits per scope in ``meta.db``, and the :class:`LimitTable` built from them."""

    def __init__(self, path: str | Path, *, reload_s: float = 1.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.reload_s = reload_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)
        self._db.commit()
        self.table = LimitTable()
        self._watch = DbChangeWatch(self._db, self.path)
        self._checked = 0.0
        self._reload()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _reload(self) -> None:
        rows = self._db.execute(
            "SELECT tenant, department, app, key_id, end_user, model, spec FROM limits"
        ).fetchall()
        table = LimitTable()
        for row in rows:
            target = _target(row)
            try:
                table.set(target.scope(), limits_from_dict(orjson.loads(row[6])))
            except LimitError:
                continue  # validated on write; a row edited by hand is ignored
        self.table = table
        self._watch.mark()

    def refresh(self, now: float | None = None) -> bool:
        """Reload when another process changed the limits; True if it did."""
        now = time.monotonic() if now is None else now
        if now - self._checked < self.reload_s:
            return False
        with self._lock:
            self._checked = now
            if not self._watch.files_changed():
                return False
            self._reload()
            return True

    # --- administration -----------------------------------------------------------
    def get(self, target: LimitTarget) -> ScopeLimits | None:
        with self._lock:
            row = self._db.execute(
                "SELECT spec FROM limits WHERE tenant=? AND department=? AND app=? AND "
                "key_id=? AND end_user=? AND model=?", target.row()).fetchone()
        return limits_from_dict(orjson.loads(row[0])) if row else None

    def set(self, target: LimitTarget, changes: Mapping[str, Any]) -> ScopeLimits:
        """Merge ``changes`` into the target's limits (a ``None`` value removes that
        limit); validated before anything is written."""
        target.scope()
        spec = merge_limits(self.get(target), changes)
        body = orjson.dumps(limits_to_dict(spec)).decode()
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO limits VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (*target.row(), body, time.time()))
            self._reload()
        return spec

    def delete(self, target: LimitTarget) -> bool:
        with self._lock, self._db:
            cur = self._db.execute(
                "DELETE FROM limits WHERE tenant=? AND department=? AND app=? AND key_id=? "
                "AND end_user=? AND model=?", target.row())
            self._reload()
        return cur.rowcount > 0

    def delete_tenant(self, tenant: str) -> int:
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM limits WHERE tenant=?", (tenant,))
            self._reload()
        return cur.rowcount

    def entries(self, tenant: str | None = None) -> list[LimitEntry]:
        sql = ("SELECT tenant, department, app, key_id, end_user, model, spec, updated_at "
               "FROM limits")
        args: tuple[str, ...] = ()
        if tenant is not None:
            sql, args = sql + " WHERE tenant=?", (tenant,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY tenant, department, app, key_id, "
                                    "end_user, model", args).fetchall()
        out: list[LimitEntry] = []
        for row in rows:
            try:
                spec = limits_from_dict(orjson.loads(row[6]))
            except LimitError:
                continue
            out.append(LimitEntry(_target(row), spec, row[7]))
        return out


def budget_micros(amount: str | int | float) -> int:
    """A money amount in currency units (``"12.50"``) as integer micro-units."""
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        raise LimitError(f"budget must be a decimal amount, got {amount!r}") from None
    if not value.is_finite() or value < 0:
        raise LimitError(f"budget must be a non-negative amount, got {amount!r}")
    if value > MAX_BUDGET:
        raise LimitError(f"budget must be at most {MAX_BUDGET}, got {amount!r}")
    return int((value * 1_000_000).to_integral_value())
