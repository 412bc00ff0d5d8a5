"""The parent of ``serve --workers N``: restarts with a growing backoff, a start that
fails stops everyone, a stop restarts nothing. Real spawned processes."""

from __future__ import annotations

import logging
import multiprocessing
import re
import threading
import time

import pytest

from tests.cli import supervisor_targets as targets
from tokenplane.cli.supervisor import Supervisor

pytestmark = pytest.mark.timeout(120)
CTX = multiprocessing.get_context("spawn")


def _stop_when(sup: Supervisor, cond: object) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 60
        while not cond() and time.monotonic() < deadline:  # type: ignore[operator]
            time.sleep(0.02)
        sup.stop()
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_worker_that_never_serves_fails_the_start() -> None:
    t0 = time.monotonic()
    assert Supervisor(CTX, targets.fail_at_once, 2).run() == 3
    assert time.monotonic() - t0 < 30


def test_a_crash_loop_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tokenplane.supervisor")
    sup = Supervisor(CTX, targets.serve_then_die, 1, backoff_initial_s=0.05,
                     backoff_max_s=0.2, stable_s=3600)
    watcher = _stop_when(sup, lambda: sup.restarts >= 4)
    sup.run()
    watcher.join()
    delays = [float(m) for m in re.findall(r"restarting it in ([0-9.]+) s", caplog.text)]
    assert delays[:4] == [0.05, 0.1, 0.2, 0.2]  # doubling, capped
    assert "died (exit code 1)" in caplog.text


def test_a_stop_stops_everyone_and_restarts_nothing() -> None:
    sup = Supervisor(CTX, targets.serve_until_term, 2)
    watcher = _stop_when(sup, lambda: all(s.served for s in sup.slots))
    assert sup.run() == 0
    watcher.join()
    assert sup.restarts == 0
    assert all(s.proc is None for s in sup.slots)


def test_it_announces_once_when_every_worker_serves() -> None:
    announced: list[bool] = []
    sup = Supervisor(CTX, targets.serve_until_term, 2,
                     on_all_serving=lambda _: announced.append(
                         all(s.served for s in sup.slots)))
    watcher = _stop_when(sup, lambda: bool(announced))
    assert sup.run() == 0
    watcher.join()
    assert announced == [True]  # once, and only when both served
