"""The parent of ``serve --workers N``: restarts with a growing backoff, a start that
fails stops everyone, a stop restarts nothing. Real spawned processes."""

from __future__ import annotations

import logging
import multiprocessing
import re
import time

import pytest

from tests.cli import supervisor_targets as targets
from tokenplane.cli.supervisor import Supervisor

pytestmark = pytest.mark.timeout(120)
CTX = multiprocessing.get_context("spawn")


class _StopAfterRestarts(logging.Handler):
    """Stops the supervisor from inside its loop once it has logged ``n`` restarts (the
    log line is the event: nothing to poll)."""

    def __init__(self, sup: Supervisor, n: int) -> None:
        super().__init__(logging.WARNING)
        self.sup, self.n = sup, n

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("restarting worker") and self.sup.restarts >= self.n:
            self.sup.stop()


def test_a_worker_that_never_serves_fails_the_start() -> None:
    t0 = time.monotonic()
    assert Supervisor(CTX, targets.fail_at_once, 2).run() == 3
    assert time.monotonic() - t0 < 30


def test_a_crash_loop_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tokenplane.supervisor")
    sup = Supervisor(CTX, targets.serve_then_die, 1, backoff_initial_s=0.05,
                     backoff_max_s=0.2, stable_s=3600)
    stopper = _StopAfterRestarts(sup, 4)
    logging.getLogger("tokenplane.supervisor").addHandler(stopper)
    try:
        sup.run()
    finally:
        logging.getLogger("tokenplane.supervisor").removeHandler(stopper)
    delays = [float(m) for m in re.findall(r"restarting it in ([0-9.]+) s", caplog.text)]
    assert delays[:4] == [0.05, 0.1, 0.2, 0.2]  # doubling, capped
    assert "died (exit code 1)" in caplog.text


def test_a_stop_stops_everyone_and_restarts_nothing() -> None:
    sup = Supervisor(CTX, targets.serve_until_term, 2,
                     on_all_serving=lambda _: sup.stop())  # called once both serve
    assert sup.run() == 0
    assert all(s.served for s in sup.slots)
    assert sup.restarts == 0
    assert all(s.proc is None for s in sup.slots)


def test_it_announces_once_when_every_worker_serves() -> None:
    announced: list[bool] = []

    def announce(_: str) -> None:
        announced.append(all(s.served for s in sup.slots))
        sup.stop()

    sup = Supervisor(CTX, targets.serve_until_term, 2, on_all_serving=announce)
    assert sup.run() == 0
    assert announced == [True]  # once, and only when both served
