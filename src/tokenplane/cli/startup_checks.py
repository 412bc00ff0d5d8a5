"""What ``tokenplane serve`` checks before it creates anything (the first start's
admin key included): each failure is one line saying what is wrong and how to fix
it, and ``serve`` exits 2 (as for a bad config) rather than with a traceback.

The checks: the listen port and the metrics port can be bound; the data directory
is not held by another gateway (an ``flock`` on ``<data_dir>/serve.lock`` that
this process then keeps until it exits); PostgreSQL (``database_url``) and Redis
(``redis_url``) answer; the audit signing key (and the content key of ``full``
retention) can be read.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tokenplane.config.schema import GatewayConfig, listen_address

LOCK_FILE = "serve.lock"
CONNECT_TIMEOUT_S = 5.0


class StartupError(Exception):
    """One line for the operator: what failed and how to fix it."""


def port_problem(host: str, port: int, what: str, fix: str) -> str | None:
    """None when ``host:port`` can be bound now (0: any port, always)."""
    if port == 0:
        return None
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socket.create_server((host, port), family=family).close()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason = "the port is in use (another gateway?)"
        return f"{what}: cannot listen on {host}:{port}: {reason}; {fix}"
    return None


@dataclass
class DataDirLock:
    """The exclusive hold of a data directory by one ``serve`` (its workers
    included). The kernel drops the lock when the process ends, however it ends."""

    home: Path
    _fd: int | None = field(default=None, repr=False)

    def acquire(self) -> None:
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StartupError(
                f"data_dir: cannot use {self.home} ({exc.strerror}): make it writable by "
                "this user, or choose another with --set data_dir=PATH or "
                "$TOKENPLANE_HOME") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StartupError(
                f"data_dir: {self.home} is held by another gateway (pid {holder}): stop "
                "it, or give this one a data directory of its own (--set data_dir=PATH or "
                "$TOKENPLANE_HOME)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _where(url: str) -> str:
    u = urlsplit(url)
    try:
        port = f":{u.port}" if u.port else ""
    except ValueError:
        port = ""
    return f"{u.hostname or 'localhost'}{port}"


async def _pg_answers(url: str) -> None:
    import asyncpg

    from tokenplane.metering.stores.postgres import split_schema

    dsn, _ = split_schema(url)
    con = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    await con.close()


def postgres_problem(url: str | None) -> str | None:
    from tokenplane.meta.pg_meta import is_postgres_url

    if url is None or not is_postgres_url(url):
        return None
    try:
        asyncio.run(asyncio.wait_for(_pg_answers(url), CONNECT_TIMEOUT_S + 1))
    except Exception as exc:  # any failure to connect is the one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return (f"database_url: cannot reach PostgreSQL at {_where(url)} ({reason}): start "
                "it or fix database_url / $TOKENPLANE_DATABASE_URL (user, password, "
                "database name)")
    return None


def redis_problem(url: str | None) -> str | None:
    if not url:
        return None
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                      socket_timeout=CONNECT_TIMEOUT_S)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.exceptions.RedisError, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return (f"redis_url: cannot reach Redis at {_where(url)} ({reason}): start it or "
                "fix redis_url / $TOKENPLANE_REDIS_URL")
    return None


def audit_key_problem(cfg: GatewayConfig, home: Path) -> str | None:
    from tokenplane.governance.audit.keyfile import key_from_env, resolve_key

    audit = cfg.governance.audit
    if not (cfg.governance.enabled and audit.enabled):
        return None
    try:
        resolve_key(home, audit.key_env, audit.key_file, create=False)
        content_env = audit.encryption_key_env if audit.retention == "full" else None
        if content_env is not None and key_from_env(content_env) is None:
            return (f"governance.audit: retention 'full' needs the content key in "
                    f"${content_env}: set it (16 bytes or more)")
    except (ValueError, OSError) as exc:
        return (f"governance.audit: bad audit key: {exc}: give a file of 16 bytes or more "
                f"(governance.audit.key_file) or set ${audit.key_env} "
                "(docs/GOVERNANCE.md, 'Audit threat model')")
    return None


def startup_problems(cfg: GatewayConfig, host: str, port: int) -> list[str]:
    """Every check but the data directory's lock, in the order they are reported."""
    home = Path(cfg.data_dir or ".tokenplane")
    found = [port_problem(host, port, "server", "stop what holds it or choose another "
                          "with --port")]
    if cfg.observe.metrics.listen is not None:
        mhost, mport = listen_address(cfg.observe.metrics.listen)
        found.append(port_problem(mhost, mport, "observe.metrics.listen",
                                  "choose another with --metrics-listen HOST:PORT, or "
                                  "--set observe.metrics.listen=null for none"))
    found += [postgres_problem(cfg.database_url), redis_problem(cfg.redis_url),
              audit_key_problem(cfg, home)]
    return [line for line in found if line is not None]
