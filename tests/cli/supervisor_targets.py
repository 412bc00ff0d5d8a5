"""Worker targets for the supervisor tests (module level: spawn imports them)."""

from __future__ import annotations

import signal
import sys
import time
from multiprocessing.connection import Connection


def fail_at_once(index: int, ready: Connection) -> None:
    sys.exit(3)


def serve_then_die(index: int, ready: Connection) -> None:
    ready.send_bytes(b"serving")
    sys.exit(1)


def serve_until_term(index: int, ready: Connection) -> None:
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
    ready.send_bytes(b"serving")
    while not stopped:
        time.sleep(0.01)
