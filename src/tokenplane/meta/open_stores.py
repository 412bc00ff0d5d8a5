"""Which metadata stores to open: PostgreSQL when the database URL is
``postgresql://`` (shared by every replica), else SQLite ``<home>/meta.db``."""

from __future__ import annotations

import os
from pathlib import Path

from tokenplane.meta.directory import Directory
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import LimitStore
from tokenplane.meta.pg_meta import PgMeta, is_postgres_url


def database_url(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("TOKENPLANE_DATABASE_URL") or None


def open_key_store(home: Path, url: str | None) -> KeyStore:
    if url is not None and is_postgres_url(url):
        from tokenplane.meta.pg_stores import PgKeyStore

        return PgKeyStore(PgMeta(url))
    return KeyStore(home / "meta.db")


def open_limit_store(keys: KeyStore, home: Path, reload_s: float = 1.0) -> LimitStore:
    """The limit store next to ``keys`` (sharing its PostgreSQL connection)."""
    from tokenplane.meta.pg_stores import PgKeyStore, PgLimitStore

    if isinstance(keys, PgKeyStore):
        return PgLimitStore(keys.meta.share())
    return LimitStore(home / "meta.db", reload_s=reload_s)


def open_directory(keys: KeyStore) -> Directory:
    from tokenplane.meta.pg_stores import PgDirectory, PgKeyStore

    if isinstance(keys, PgKeyStore):
        return PgDirectory(keys.meta.share())
    return Directory(keys.path)


def open_limits(home: Path, url: str | None) -> LimitStore:
    """A standalone limit store (the CLI)."""
    if url is not None and is_postgres_url(url):
        from tokenplane.meta.pg_stores import PgLimitStore

        return PgLimitStore(PgMeta(url))
    return LimitStore(home / "meta.db")
