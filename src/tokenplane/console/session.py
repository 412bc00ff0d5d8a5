"""Console sessions: an encrypted, signed, expiring cookie that holds the API key.

The cookie is a Fernet token (AES-128-CBC, then HMAC-SHA256 over it, with its issue
time) of ``{"k": key, "c": csrf token, "s": session id}``. The key stays secret from
the browser's scripts (``HttpOnly``) and from anyone reading the cookie (encrypted);
the gateway checks the key on every request, so revoking it ends the session at once.
Signing out records the session id in the metadata database until the cookie would
have expired (``KeyStore.end_session``), so a copy of the cookie is refused from then
on by every worker and replica (SQLite: at once; PostgreSQL: within its poll). The secret
comes from the variable ``console.secret_env`` names or from ``<data_dir>/console.secret``
(created once, mode 0600), so every worker of ``serve --workers N`` reads the same one.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import orjson
from cryptography.fernet import Fernet, InvalidToken

COOKIE = "tp_console"
LANG_COOKIE = "tp_lang"
SECRET_FILE = "console.secret"


@dataclass(frozen=True, slots=True)
class Session:
    key: str  # the API key signed in with
    csrf: str  # the token every form of this session carries
    sid: str  # the session's id, recorded when it signs out


def console_secret(home: Path, env: str | None) -> bytes:
    """The cookie secret: from ``$env`` when set, else the data directory's file
    (made atomically by whichever worker comes first)."""
    if env:
        value = os.environ.get(env)
        if value:
            return hashlib.sha256(value.encode("utf-8")).digest()
    path = home / SECRET_FILE
    if not path.exists():
        tmp = home / f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if another worker made it first: theirs wins
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return hashlib.sha256(path.read_bytes().strip()).digest()


class SessionCodec:
    def __init__(self, secret: bytes, ttl_s: int) -> None:
        self._fernet = Fernet(base64.urlsafe_b64encode(secret[:32]))
        self.ttl_s = ttl_s

    def issue(self, key: str) -> tuple[str, Session]:
        session = Session(key, secrets.token_urlsafe(24), secrets.token_urlsafe(18))
        token = self._fernet.encrypt(orjson.dumps({"k": session.key, "c": session.csrf,
                                                   "s": session.sid}))
        return token.decode("ascii"), session

    def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie; None if absent, forged, altered or expired."""
        if not cookie:
            return None
        try:
            data = orjson.loads(self._fernet.decrypt(cookie.encode("ascii"), ttl=self.ttl_s))
        except (InvalidToken, UnicodeEncodeError, orjson.JSONDecodeError):
            return None
        if not isinstance(data, dict):
            return None
        key, csrf, sid = data.get("k"), data.get("c"), data.get("s")
        if not isinstance(key, str) or not isinstance(csrf, str) or not isinstance(sid, str):
            return None  # (a cookie from before session ids: sign in again)
        return Session(key, csrf, sid)
