"""Helpers shared by the verbs: data directory and stores."""

from __future__ import annotations

import os
from pathlib import Path

from tokenplane.auth.keystore import KeyStore


def data_dir(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("TOKENPLANE_HOME") or ".tokenplane")


def open_keys(home: Path) -> KeyStore:
    return KeyStore(home / "meta.db")
