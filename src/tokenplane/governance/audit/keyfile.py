"""Where the audit keys come from: environment variables, or a generated key file.

The signing (HMAC) key is read from the variable the config names
(``TOKENPLANE_AUDIT_KEY`` by default); when it is unset, a random key is generated
on first start into ``<data_dir>/audit.key`` (mode 0600) and reused afterwards.
Keys are never taken from the configuration file itself.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

KEY_FILE = "audit.key"


def key_from_env(env_name: str, env: Mapping[str, str] | None = None) -> bytes | None:
    value = (os.environ if env is None else env).get(env_name)
    if not value:
        return None
    key = value.strip().encode()
    if len(key) < 16:
        raise ValueError(f"${env_name} must hold at least 16 bytes")
    return key


def read_key_file(home: Path) -> bytes | None:
    path = home / KEY_FILE
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        return None
    if len(key) < 16:
        raise ValueError(f"{path} holds fewer than 16 bytes")
    return key


def audit_key(home: Path, env_name: str, env: Mapping[str, str] | None = None,
              create: bool = True) -> tuple[bytes, str] | None:
    """``(key, source)`` with source ``env``, ``file`` or ``generated``; None when
    there is no key and ``create`` is false. Safe when several workers start at once:
    the file is created exclusively and a loser reads the winner's key."""
    key = key_from_env(env_name, env)
    if key is not None:
        return key, "env"
    key = read_key_file(home)
    if key is not None:
        return key, "file"
    if not create:
        return None
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, home / KEY_FILE)  # fails if another worker got there first
        source = "generated"
    except FileExistsError:
        source = "file"
    finally:
        tmp.unlink()
    key = read_key_file(home)
    assert key is not None
    return key, source
