"""The organisation in ``meta.db``: tenants, departments and apps (keys: KeyStore).

The tables are created by :class:`tokenplane.meta.keystore.KeyStore`; this class
lists and deletes rows (creating goes through ``KeyStore.ensure_scope``). Deleting a
tenant, department or app revokes its keys; the gateway refuses them from their next
request (the key store notices the commit).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any


class Directory:
    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA busy_timeout=30000")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    def tenants(self) -> list[dict[str, Any]]:
        return [{"name": r[0], "created_at": r[1]}
                for r in self._rows("SELECT name, created_at FROM tenants ORDER BY name")]

    def has_tenant(self, tenant: str) -> bool:
        return bool(self._rows("SELECT 1 FROM tenants WHERE name=?", (tenant,)))

    def departments(self, tenant: str) -> list[dict[str, Any]]:
        return [{"tenant": tenant, "name": r[0], "created_at": r[1]}
                for r in self._rows("SELECT name, created_at FROM departments WHERE tenant=? "
                                    "ORDER BY name", (tenant,))]

    def apps(self, tenant: str) -> list[dict[str, Any]]:
        return [{"tenant": tenant, "department": r[0] or None, "name": r[1], "created_at": r[2]}
                for r in self._rows("SELECT department, name, created_at FROM apps WHERE "
                                    "tenant=? ORDER BY department, name", (tenant,))]

    def _revoke(self, where: str, args: tuple[Any, ...]) -> int:
        cur = self._db.execute(
            f"UPDATE api_keys SET revoked_at=? WHERE revoked_at IS NULL AND {where}",
            (time.time(), *args))
        return cur.rowcount

    def delete_tenant(self, tenant: str) -> bool:
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM tenants WHERE name=?", (tenant,))
            self._db.execute("DELETE FROM departments WHERE tenant=?", (tenant,))
            self._db.execute("DELETE FROM apps WHERE tenant=?", (tenant,))
            self._revoke("tenant=?", (tenant,))
        return cur.rowcount > 0

    def delete_department(self, tenant: str, department: str) -> bool:
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM departments WHERE tenant=? AND name=?",
                                   (tenant, department))
            self._db.execute("DELETE FROM apps WHERE tenant=? AND department=?",
                             (tenant, department))
            self._revoke("tenant=? AND department=?", (tenant, department))
        return cur.rowcount > 0

    def delete_app(self, tenant: str, department: str | None, app: str) -> bool:
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM apps WHERE tenant=? AND department=? AND name=?",
                                   (tenant, department or "", app))
            if department:
                self._revoke("tenant=? AND department=? AND app=?", (tenant, department, app))
            else:
                self._revoke("tenant=? AND department IS NULL AND app=?", (tenant, app))
        return cur.rowcount > 0
