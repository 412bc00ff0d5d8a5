"""API keys in the data directory's metadata database (SQLite), hashed.

Only the SHA-256 of a key is stored. Keys carry enough entropy (256 bits) that a
fast hash is the right choice: a key is looked up by its hash. The gateway keeps the
keys (and each live key's principal) in memory and reloads them when another process
(``tokenplane keys create/revoke``) commits a change. At most every
``watch_interval_s`` (50 ms) a request looks at the database and WAL files' size and
mtime (two ``stat`` calls); a change prompts a check of SQLite's ``PRAGMA
data_version``, and a reload when it moved. An unknown key, or a second without a
check, prompts the check at once. A revocation takes effect within 50 ms.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenplane.auth.principal import Principal
from tokenplane.meta.db_watch import DbChangeWatch

KEY_PREFIX = "tp-"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (name TEXT PRIMARY KEY, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS departments (
  tenant TEXT NOT NULL, name TEXT NOT NULL, created_at REAL NOT NULL,
  PRIMARY KEY (tenant, name));
CREATE TABLE IF NOT EXISTS apps (
  tenant TEXT NOT NULL, department TEXT NOT NULL DEFAULT '', name TEXT NOT NULL,
  created_at REAL NOT NULL, PRIMARY KEY (tenant, department, name));
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL,
  tenant TEXT NOT NULL, department TEXT, app TEXT, name TEXT,
  admin INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, revoked_at REAL);
CREATE TABLE IF NOT EXISTS console_signouts (sid TEXT PRIMARY KEY, expires_at REAL NOT NULL);
"""
# columns added after the first release: added to an older file in place (expand only,
# so the previous release keeps reading the table; it ignores them)
_ADDED_COLUMNS = (("role", "TEXT"), ("expires_at", "REAL"), ("last_used_at", "REAL"))
_COLUMNS = ("id, prefix, tenant, department, app, name, admin, created_at, revoked_at, hash,"
            " role, expires_at, last_used_at")
LAST_USED_EVERY_S = 60.0  # a key's last use is written at most this often


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRecord:
    id: str
    prefix: str
    tenant: str
    department: str | None
    app: str | None
    name: str | None
    admin: bool
    created_at: float
    revoked_at: float | None
    role: str | None = None
    expires_at: float | None = None
    last_used_at: float | None = None

    def principal(self) -> Principal:
        return Principal(self.id, self.tenant, self.department, self.app, self.admin,
                         role=self.role)

    def live(self, now: float) -> bool:
        """Not revoked and not expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


def record_of(r: Any) -> KeyRecord:
    """A record from a row of :data:`_COLUMNS` (the hash, r[9], is not kept)."""
    return KeyRecord(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8], r[10], r[11],
                     r[12])


class KeyStore:
    """Tenants, departments, apps and hashed API keys in ``<data_dir>/meta.db``."""

    def __init__(self, path: str | Path, watch_interval_s: float = 0.05) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(api_keys)")}
        for column, kind in _ADDED_COLUMNS:
            if column not in have:
                self._db.execute(f"ALTER TABLE api_keys ADD COLUMN {column} {kind}")
        self._db.commit()
        self._used: dict[str, float] = {}  # key id -> last use not yet written
        self._by_hash: dict[str, KeyRecord] = {}
        self._principals: dict[str, Principal] = {}
        self._watch = DbChangeWatch(self._db, self.path)
        self._checked = 0.0
        self._looked = 0.0
        self.watch_interval_s = watch_interval_s
        self._refresh()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- reads on the request path -------------------------------------------------
    def _refresh(self) -> None:
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM api_keys").fetchall()
        self._by_hash = {r[9]: record_of(r) for r in rows}
        # a live key's principal, built once per load (principals are immutable)
        self._principals = {
            digest: rec.principal() for digest, rec in self._by_hash.items()
            if rec.revoked_at is None
        }
        self._watch.mark()

    def authenticate(self, key: str) -> Principal | None:
        """The principal for a presented key, or None if unknown or revoked."""
        digest = hash_key(key)
        with self._lock:
            now = time.monotonic()
            watch = self._watch
            if not watch.valid or digest not in self._by_hash or now - self._checked > 1.0:
                self._checked = self._looked = now
                if watch.changed():
                    self._refresh()
            elif now - self._looked >= self.watch_interval_s:
                self._looked = now
                if watch.files_changed():
                    self._checked = now
                    self._refresh()
            return self._live(digest)

    def _live(self, digest: str) -> Principal | None:
        """The principal of a live key (noting its use), None if unknown, revoked or
        expired."""
        principal = self._principals.get(digest)
        if principal is None:
            return None
        rec = self._by_hash[digest]
        now = time.time()
        if rec.expires_at is not None and now >= rec.expires_at:
            return None
        self._used[rec.id] = now
        return principal

    def flush_last_used(self) -> int:
        """Write the keys' last use noted since the previous flush (a gateway calls it
        every :data:`LAST_USED_EVERY_S`); how many keys."""
        with self._lock:
            used, self._used = self._used, {}
        if not used:
            return 0
        self._write_last_used(used)
        return len(used)

    def _write_last_used(self, used: dict[str, float]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "UPDATE api_keys SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?",
                [(ts, key_id) for key_id, ts in used.items()])

    # --- administration ------------------------------------------------------------
    def create_tenant(self, tenant: str) -> bool:
        """Insert the tenant; False if it exists. One statement that the primary key
        decides, so of two concurrent creates exactly one is True."""
        with self._lock, self._db:
            cur = self._db.execute("INSERT OR IGNORE INTO tenants VALUES (?, ?)",
                                   (tenant, time.time()))
            return cur.rowcount == 1

    def ensure_scope(self, tenant: str, department: str | None, app: str | None) -> None:
        now = time.time()
        with self._lock, self._db:
            self._db.execute("INSERT OR IGNORE INTO tenants VALUES (?, ?)", (tenant, now))
            if department:
                self._db.execute(
                    "INSERT OR IGNORE INTO departments VALUES (?, ?, ?)", (tenant, department, now)
                )
            if app:
                self._db.execute(
                    "INSERT OR IGNORE INTO apps VALUES (?, ?, ?, ?)",
                    (tenant, department or "", app, now),
                )

    def create_key(
        self,
        tenant: str,
        department: str | None = None,
        app: str | None = None,
        name: str | None = None,
        admin: bool = False,
        role: str | None = None,
        expires_at: float | None = None,
    ) -> tuple[str, KeyRecord]:
        """Create a key; returns (the key in clear, shown once, and its record)."""
        admin = admin or role == "operator"
        self.ensure_scope(tenant, department, app)
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        rec = KeyRecord(
            id="key_" + secrets.token_hex(6),
            prefix=key[:10],
            tenant=tenant,
            department=department,
            app=app,
            name=name,
            admin=admin,
            created_at=time.time(),
            revoked_at=None,
            role="operator" if admin else role,
            expires_at=expires_at,
        )
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO api_keys (id, hash, prefix, tenant, department, app, name, admin,"
                " created_at, role, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rec.id, hash_key(key), rec.prefix, tenant, department, app, name,
                 int(admin), rec.created_at, rec.role, expires_at),
            )
            self._watch.invalidate()
        return key, rec

    def create_first_key(self, tenant: str, name: str) -> tuple[str, KeyRecord] | None:
        """An admin key for ``tenant`` if the store holds no key at all, else None:
        the check and the insert are one write transaction (``BEGIN IMMEDIATE``), so
        of several gateways starting at once on this file exactly one creates it."""
        self.ensure_scope(tenant, None, None)
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        rec = KeyRecord("key_" + secrets.token_hex(6), key[:10], tenant, None, None, name,
                        True, time.time(), None, "operator")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute(
                    "INSERT INTO api_keys (id, hash, prefix, tenant, name, admin, created_at,"
                    " role) SELECT ?, ?, ?, ?, ?, 1, ?, 'operator'"
                    " WHERE NOT EXISTS (SELECT 1 FROM api_keys)",
                    (rec.id, hash_key(key), rec.prefix, tenant, name, rec.created_at))
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise
            self._watch.invalidate()
        return (key, rec) if cur.rowcount == 1 else None

    def revoke(self, key_id: str) -> bool:
        with self._lock, self._db:
            cur = self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (time.time(), key_id),
            )
            self._watch.invalidate()
        return cur.rowcount > 0

    # --- console sessions ended by signing out ----------------------------------------
    def end_session(self, sid: str, expires_at: float) -> None:
        """Records a console session as signed out until its cookie would have
        expired anyway (every worker and replica reading this database refuses it
        from now on); sessions past their expiry are forgotten."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO console_signouts VALUES (?, ?)",
                             (sid, expires_at))
            self._db.execute("DELETE FROM console_signouts WHERE expires_at < ?",
                             (time.time(),))

    def session_ended(self, sid: str) -> bool:
        """Whether the console session ``sid`` was signed out (read from the
        database on each call: the console's pages are not the request path)."""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM console_signouts WHERE sid = ?",
                                   (sid,)).fetchone()
        return row is not None
    def get(self, key_id: str) -> KeyRecord | None:
        return next((r for r in self.list_keys(None) if r.id == key_id), None)

    def set_expiry(self, key_id: str, expires_at: float | None) -> bool:
        """Expire a live key at ``expires_at`` (sooner only: never extends a key that
        already expires earlier); False if there is no such live key."""
        with self._lock, self._db:
            cur = self._db.execute(
                "UPDATE api_keys SET expires_at = ? WHERE id = ? AND revoked_at IS NULL"
                " AND (expires_at IS NULL OR expires_at > ?)", (expires_at, key_id, expires_at))
            self._watch.invalidate()
        return cur.rowcount > 0

    def rotate(self, key_id: str, overlap_s: float) -> tuple[str, KeyRecord] | None:
        """A new key with the old one's tenant, department, app, name, role and
        lifetime left; the old key stays valid ``overlap_s`` more seconds (the clients'
        switch-over window). None if there is no such live key."""
        old = self.get(key_id)
        now = time.time()
        if old is None or not old.live(now):
            return None
        expires = None if old.expires_at is None else old.expires_at - old.created_at + now
        key, rec = self.create_key(old.tenant, old.department, old.app, old.name, old.admin,
                                   old.role, expires)
        self.set_expiry(old.id, now + overlap_s)
        return key, rec

    def list_keys(self, tenant: str | None = None) -> list[KeyRecord]:
        with self._lock:
            self._refresh()
            recs = list(self._by_hash.values())
        if tenant is not None:
            recs = [r for r in recs if r.tenant == tenant]
        return sorted(recs, key=lambda r: r.created_at)

    def count_keys(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT COUNT(*) FROM api_keys").fetchone()
        return int(row[0])
