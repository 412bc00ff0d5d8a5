"""Where the audit secret comes from, and whether it is kept apart from the log.

In order: the file ``governance.audit.key_file`` names, the variable ``key_env``
names (``TOKENPLANE_AUDIT_KEY`` by default), else ``<data_dir>/audit.key``,
generated on first start (mode 0600). The last keeps the embedded default
working with no configuration, but a key next to the log protects nothing against
whoever can write the log: they can read the key and re-sign a forged chain. Such a
source is ``in_data_dir``: the gateway warns at start and ``audit verify`` reports
integrity only, not authenticity. Keys are never taken from the configuration file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

KEY_FILE = "audit.key"


@dataclass(frozen=True)
class KeySource:
    """``kind``: ``file`` (a configured file), ``env``, ``data_dir`` (found in the data
    directory) or ``generated`` (written there now)."""

    kind: str
    where: str  # the file's path or ``$VARIABLE``
    in_data_dir: bool

    def describe(self) -> str:
        return f"${self.where}" if self.kind == "env" else self.where


def key_from_env(env_name: str, env: Mapping[str, str] | None = None) -> bytes | None:
    value = (os.environ if env is None else env).get(env_name)
    if not value:
        return None
    key = value.strip().encode()
    if len(key) < 16:
        raise ValueError(f"${env_name} must hold at least 16 bytes")
    return key


def read_secret(path: Path) -> bytes | None:
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        return None
    if len(key) < 16:
        raise ValueError(f"{path} holds fewer than 16 bytes")
    return key


def read_key_file(home: Path) -> bytes | None:
    return read_secret(home / KEY_FILE)


def inside(path: Path, home: Path) -> bool:
    """Whether ``path`` lies under ``home`` (symbolic links resolved)."""
    try:
        path.resolve().relative_to(home.resolve())
    except ValueError:
        return False
    return True


def resolve_key(home: Path, env_name: str, key_file: str | None = None,
                env: Mapping[str, str] | None = None,
                create: bool = True) -> tuple[bytes, KeySource] | None:
    """The secret and where it came from; None when there is none and ``create`` is
    false. A configured ``key_file`` must exist (the operator asked for it). Safe when
    several workers start at once: the data-directory file is created exclusively and
    a loser reads the winner's key."""
    if key_file:
        path = Path(key_file).expanduser()
        key = read_secret(path)
        if key is None:
            raise ValueError(f"governance.audit.key_file: {path} does not exist")
        return key, KeySource("file", str(path), inside(path, home))
    key = key_from_env(env_name, env)
    if key is not None:
        return key, KeySource("env", env_name, False)
    path = home / KEY_FILE
    key = read_key_file(home)
    if key is not None:
        return key, KeySource("data_dir", str(path), True)
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
        os.link(tmp, path)  # fails if another worker got there first
        kind = "generated"
    except FileExistsError:
        kind = "data_dir"
    finally:
        tmp.unlink()
    key = read_key_file(home)
    assert key is not None
    return key, KeySource(kind, str(path), True)


def risk_warning(source: KeySource, env_name: str) -> str:
    """The start-up warning for a key kept next to the log."""
    return (
        "AUDIT LOG IS NOT TAMPER-PROOF: its signing key is in the data directory "
        f"({source.where}). Anyone who can write the audit log can read this key and "
        "re-sign a forged log, so `tokenplane audit verify` can only report integrity, "
        "not authenticity. Fix: move the key outside the data directory and set "
        f"governance.audit.key_file to its path (or set ${env_name}); the same key keeps "
        "the records written so far verifiable. See docs/GOVERNANCE.md, "
        "'Audit threat model'."
    )
