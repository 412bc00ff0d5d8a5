"""Helpers shared by the verbs: data directory and stores."""

from __future__ import annotations

import os
from pathlib import Path

from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.open_stores import database_url, open_key_store


def data_dir(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("TOKENPLANE_HOME") or ".tokenplane")


def open_keys(home: Path) -> KeyStore:
    """PostgreSQL when ``$TOKENPLANE_DATABASE_URL`` is one, else ``<home>/meta.db``."""
    return open_key_store(home, database_url())
