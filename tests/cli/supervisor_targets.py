"""Worker targets for the supervisor tests (module level: spawn imports them)."""

from __future__ import annotations

import signal
import sys
from multiprocessing.connection import Connection


def fail_at_once(index: int, ready: Connection) -> None:
    sys.exit(3)


def serve_then_die(index: int, ready: Connection) -> None:
    ready.send_bytes(b"serving")
    sys.exit(1)


def serve_until_term(index: int, ready: Connection) -> None:
    # blocked before "serving", so a SIGTERM sent at once waits for sigwait: no race
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    ready.send_bytes(b"serving")
    signal.sigwait({signal.SIGTERM})
