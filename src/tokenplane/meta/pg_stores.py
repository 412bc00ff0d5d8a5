"""The key store, limit store and admin directory over PostgreSQL (:mod:`pg_meta`).

Same interfaces as the SQLite classes (they subclass them), so the gateway, the
admin API and the CLI use either. The in-memory tables are swapped by loaders that
:class:`PgMeta` runs after any change, here or in another process; a request never
queries the database.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from tokenplane.admission.binding import LimitTable
from tokenplane.admission.limits import LimitError, ScopeLimits
from tokenplane.auth.principal import Principal
from tokenplane.meta.directory import Directory
from tokenplane.meta.keystore import KEY_PREFIX, KeyRecord, KeyStore, hash_key, record_of
from tokenplane.meta.limit_store import (
    LimitEntry,
    LimitStore,
    LimitTarget,
    limits_from_dict,
    limits_to_dict,
    merge_limits,
)
from tokenplane.meta.pg_meta import PgMeta

BOOTSTRAP_LOCK_ID = 7_231_404_552  # the first start's key (pg_meta's migrations: ..551)
_KEY_COLUMNS = ("id, prefix, tenant, department, app, name, admin, created_at, revoked_at, hash,"
                " role, expires_at, last_used_at")
_TARGET_WHERE = ("tenant=$1 AND department=$2 AND app=$3 AND key_id=$4 AND end_user=$5 "
                 "AND model=$6")


def _record(r: Any) -> KeyRecord:
    return record_of(r)


class PgKeyStore(KeyStore):
    """Tenants, departments, apps and hashed API keys in PostgreSQL."""

    def __init__(self, meta: PgMeta) -> None:
        self.path = Path("postgresql")
        self.meta = meta
        self._lock = threading.Lock()
        self._by_hash: dict[str, KeyRecord] = {}
        self._signed_out: frozenset[str] = frozenset()
        self._used: dict[str, float] = {}
        meta.on_change(self._load)

    async def _load(self, con: Any) -> None:
        rows = await con.fetch(f"SELECT {_KEY_COLUMNS} FROM api_keys")
        self._by_hash = {r[9]: _record(r) for r in rows}
        ended = await con.fetch("SELECT sid FROM console_signouts WHERE expires_at >= $1",
                                time.time())
        self._signed_out = frozenset(r[0] for r in ended)

    def end_session(self, sid: str, expires_at: float) -> None:
        # the version bump makes every replica reload the set within its poll
        self.meta.write([
            ("INSERT INTO console_signouts VALUES ($1, $2) ON CONFLICT (sid) DO UPDATE"
             " SET expires_at = EXCLUDED.expires_at", (sid, expires_at)),
            ("DELETE FROM console_signouts WHERE expires_at < $1", (time.time(),))])

    def session_ended(self, sid: str) -> bool:
        return sid in self._signed_out

    def close(self) -> None:
        self.meta.close()

    def authenticate(self, key: str) -> Principal | None:
        digest = hash_key(key)
        rec = self._by_hash.get(digest)
        now = time.time()
        if rec is None or not rec.live(now):
            return None
        if not hmac.compare_digest(hash_key(key), digest):
            return None
        self._used[rec.id] = now
        return rec.principal()

    def _write_last_used(self, used: dict[str, float]) -> None:
        self.meta.write([("UPDATE api_keys SET last_used_at = GREATEST(COALESCE(last_used_at,"
                          " 0), $1) WHERE id = $2", (ts, key_id))
                         for key_id, ts in used.items()])

    def set_expiry(self, key_id: str, expires_at: float | None) -> bool:
        (count,) = self.meta.write([(
            "UPDATE api_keys SET expires_at = $1 WHERE id = $2 AND revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > $1)", (expires_at, key_id))])
        return count > 0

    @staticmethod
    def _scope_statements(tenant: str, department: str | None,
                          app: str | None) -> list[tuple[str, tuple[Any, ...]]]:
        now = time.time()
        out: list[tuple[str, tuple[Any, ...]]] = [
            ("INSERT INTO tenants VALUES ($1, $2) ON CONFLICT DO NOTHING", (tenant, now))]
        if department:
            out.append(("INSERT INTO departments VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        (tenant, department, now)))
        if app:
            out.append(("INSERT INTO apps VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        (tenant, department or "", app, now)))
        return out

    def create_tenant(self, tenant: str) -> bool:
        (count,) = self.meta.write([(
            "INSERT INTO tenants VALUES ($1, $2) ON CONFLICT DO NOTHING", (tenant, time.time()))])
        return count == 1

    def ensure_scope(self, tenant: str, department: str | None, app: str | None) -> None:
        self.meta.write(self._scope_statements(tenant, department, app))

    def create_key(self, tenant: str, department: str | None = None, app: str | None = None,
                   name: str | None = None, admin: bool = False, role: str | None = None,
                   expires_at: float | None = None) -> tuple[str, KeyRecord]:
        admin = admin or role == "operator"
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        rec = KeyRecord("key_" + secrets.token_hex(6), key[:10], tenant, department, app, name,
                        admin, time.time(), None, "operator" if admin else role, expires_at)
        self.meta.write([*self._scope_statements(tenant, department, app), (
            "INSERT INTO api_keys (id, hash, prefix, tenant, department, app, name, admin,"
            " created_at, role, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
            " $11)",
            (rec.id, hash_key(key), rec.prefix, tenant, department, app, name, admin,
             rec.created_at, rec.role, expires_at))])
        return key, rec

    def create_first_key(self, tenant: str, name: str) -> tuple[str, KeyRecord] | None:
        """An admin key if the database holds none: the check and the insert run in one
        transaction under an advisory lock, so of replicas starting together on one
        database exactly one creates it (the others' statement, run once the lock is
        theirs, sees its row)."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        rec = KeyRecord("key_" + secrets.token_hex(6), key[:10], tenant, None, None, name,
                        True, time.time(), None, "operator")
        counts = self.meta.write([
            ("SELECT pg_advisory_xact_lock($1)", (BOOTSTRAP_LOCK_ID,)),
            *self._scope_statements(tenant, None, None),
            ("INSERT INTO api_keys (id, hash, prefix, tenant, name, admin, created_at, role)"
             " SELECT $1, $2, $3, $4, $5, true, $6, 'operator'"
             " WHERE NOT EXISTS (SELECT 1 FROM api_keys)",
             (rec.id, hash_key(key), rec.prefix, tenant, name, rec.created_at))])
        return (key, rec) if counts[-1] == 1 else None

    def revoke(self, key_id: str) -> bool:
        (count,) = self.meta.write([(
            "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
            (time.time(), key_id))])
        return count > 0

    def list_keys(self, tenant: str | None = None) -> list[KeyRecord]:
        rows = self.meta.fetch(f"SELECT {_KEY_COLUMNS} FROM api_keys")
        recs = [_record(r) for r in rows]
        if tenant is not None:
            recs = [r for r in recs if r.tenant == tenant]
        return sorted(recs, key=lambda r: r.created_at)

    def count_keys(self) -> int:
        return int(self.meta.fetch("SELECT COUNT(*) FROM api_keys")[0][0])


class PgLimitStore(LimitStore):
    """Limits per scope in PostgreSQL, and the :class:`LimitTable` built from them."""

    def __init__(self, meta: PgMeta) -> None:
        self.path = Path("postgresql")
        self.reload_s = meta.poll_s
        self.meta = meta
        self._lock = threading.Lock()
        self.table = LimitTable()
        meta.on_change(self._load)

    async def _load(self, con: Any) -> None:
        rows = await con.fetch(
            "SELECT tenant, department, app, key_id, end_user, model, spec FROM limits")
        table = LimitTable()
        for row in rows:
            target = _target(row)
            try:
                table.set(target.scope(), limits_from_dict(orjson.loads(row[6])))
            except LimitError:
                continue
        self.table = table

    def close(self) -> None:
        self.meta.close()

    def refresh(self, now: float | None = None) -> bool:
        """Nothing to do: the poll thread swaps :attr:`table`."""
        return False

    def get(self, target: LimitTarget) -> ScopeLimits | None:
        rows = self.meta.fetch(f"SELECT spec FROM limits WHERE {_TARGET_WHERE}", *target.row())
        return limits_from_dict(orjson.loads(rows[0][0])) if rows else None

    def set(self, target: LimitTarget, changes: Mapping[str, Any]) -> ScopeLimits:
        target.scope()
        spec = merge_limits(self.get(target), changes)
        body = orjson.dumps(limits_to_dict(spec)).decode()
        self.meta.write([(
            "INSERT INTO limits VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant,"
            " department, app, key_id, end_user, model) DO UPDATE SET spec = EXCLUDED.spec,"
            " updated_at = EXCLUDED.updated_at", (*target.row(), body, time.time()))])
        return spec

    def delete(self, target: LimitTarget) -> bool:
        (count,) = self.meta.write([(f"DELETE FROM limits WHERE {_TARGET_WHERE}", target.row())])
        return count > 0

    def delete_tenant(self, tenant: str) -> int:
        (count,) = self.meta.write([("DELETE FROM limits WHERE tenant=$1", (tenant,))])
        return count

    def entries(self, tenant: str | None = None) -> list[LimitEntry]:
        sql = ("SELECT tenant, department, app, key_id, end_user, model, spec, updated_at "
               "FROM limits")
        args: tuple[str, ...] = ()
        if tenant is not None:
            sql, args = sql + " WHERE tenant=$1", (tenant,)
        rows = self.meta.fetch(sql + " ORDER BY tenant, department, app, key_id, end_user, "
                               "model", *args)
        out: list[LimitEntry] = []
        for row in rows:
            try:
                spec = limits_from_dict(orjson.loads(row[6]))
            except LimitError:
                continue
            out.append(LimitEntry(_target(row), spec, row[7]))
        return out


def _target(row: Any) -> LimitTarget:
    return LimitTarget(str(row[0]), *(str(v) if v else None for v in row[1:6]))


class PgDirectory(Directory):
    """Tenants, departments and apps in PostgreSQL; deleting one revokes its keys."""

    def __init__(self, meta: PgMeta) -> None:
        self.meta = meta

    def close(self) -> None:
        self.meta.close()

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        n = iter(range(1, 100))
        return self.meta.fetch("".join(f"${next(n)}" if c == "?" else c for c in sql), *args)

    @staticmethod
    def _revoking(where: str, args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
        return (f"UPDATE api_keys SET revoked_at=$1 WHERE revoked_at IS NULL AND {where}",
                (time.time(), *args))

    def delete_tenant(self, tenant: str) -> bool:
        counts = self.meta.write([
            ("DELETE FROM tenants WHERE name=$1", (tenant,)),
            ("DELETE FROM departments WHERE tenant=$1", (tenant,)),
            ("DELETE FROM apps WHERE tenant=$1", (tenant,)),
            self._revoking("tenant=$2", (tenant,))])
        return counts[0] > 0

    def delete_department(self, tenant: str, department: str) -> bool:
        counts = self.meta.write([
            ("DELETE FROM departments WHERE tenant=$1 AND name=$2", (tenant, department)),
            ("DELETE FROM apps WHERE tenant=$1 AND department=$2", (tenant, department)),
            self._revoking("tenant=$2 AND department=$3", (tenant, department))])
        return counts[0] > 0

    def delete_app(self, tenant: str, department: str | None, app: str) -> bool:
        revoke = (self._revoking("tenant=$2 AND department=$3 AND app=$4",
                                 (tenant, department, app))
                  if department else
                  self._revoking("tenant=$2 AND department IS NULL AND app=$3", (tenant, app)))
        counts = self.meta.write([
            ("DELETE FROM apps WHERE tenant=$1 AND department=$2 AND name=$3",
             (tenant, department or "", app)), revoke])
        return counts[0] > 0
