"""Cheap detection of commits that another process made to a SQLite database.

A commit by any process touches the database file or its WAL, so comparing their
size and mtime (two ``stat`` calls) says whether anything may have changed; SQLite's
``PRAGMA data_version`` then says for certain whether another connection committed
(it does not move for this connection's own writes). Used by the key store and the
limit store, which keep their tables in memory on the request path.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


class DbChangeWatch:
    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self._path = path
        self._version = -1
        self._signature: tuple[int, ...] = ()

    def _files(self) -> tuple[int, ...]:
        sig: list[int] = []
        for suffix in ("-wal", ""):
            try:
                st = os.stat(f"{self._path}{suffix}")
            except FileNotFoundError:
                sig.extend((0, 0))
                continue
            sig.extend((st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def _data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def mark(self) -> None:
        """Record the database as just (re)loaded."""
        self._version = self._data_version()
        self._signature = self._files()

    def invalidate(self) -> None:
        """Our own writes do not move ``data_version``: force the next check to reload."""
        self._version = -1

    @property
    def valid(self) -> bool:
        return self._version >= 0

    def changed(self) -> bool:
        """True when another process committed since :meth:`mark` (the pragma only)."""
        return self._version < 0 or self._data_version() != self._version

    def files_changed(self) -> bool:
        """The stat-based look: False means nothing can have changed. When the files
        moved but no commit came from elsewhere, the new signature is remembered."""
        if self._files() == self._signature:
            return False
        if not self.changed():
            self._signature = self._files()
            return False
        return True
