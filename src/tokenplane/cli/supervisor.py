"""The parent process of ``tokenplane serve --workers N``.

It starts the N workers, and replaces one that dies (``kill -9``, a crash, the kernel's
OOM killer) with a fresh worker of the same index: the new worker claims the same
writer id (``w<index>``), so it replays what the dead one left in its journal, and the
port keeps serving through the siblings meanwhile. A worker that keeps dying is
restarted with exponential backoff (``backoff_initial_s`` doubling up to
``backoff_max_s``; a worker that ran ``stable_s`` resets it), and each death and
restart is logged. A worker of the first generation that dies before it ever served
is a start-up failure (a bad config, a port in use): everyone is stopped and the
parent exits with its code, as a single-process ``serve`` would.

SIGTERM and SIGINT are forwarded to every worker (a graceful stop: each drains its
requests and journal); nothing is restarted after that, and the parent exits once
all of them have.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnContext, SpawnProcess
from types import FrameType

log = logging.getLogger("tokenplane.supervisor")

# target(index, ready): runs worker ``index``; sends one message on ``ready`` once serving
WorkerTarget = Callable[[int, Connection], None]


@dataclass
class _Slot:
    index: int
    proc: SpawnProcess | None = None
    ready_rx: Connection | None = None
    started_at: float = 0.0
    served: bool = False  # this slot's worker was serving at least once
    quick_deaths: int = 0  # deaths in a row within ``stable_s`` of a start
    restart_at: float | None = None
    exit_code: int = 0


class Supervisor:
    def __init__(self, ctx: SpawnContext, target: WorkerTarget, workers: int, *,
                 backoff_initial_s: float = 0.5, backoff_max_s: float = 30.0,
                 stable_s: float = 30.0, poll_s: float = 0.5,
                 on_all_serving: Callable[[str], None] | None = None) -> None:
        self.ctx = ctx
        # called once, when every worker of the first start serves (the banner)
        self.on_all_serving = on_all_serving
        self.target = target
        self.slots = [_Slot(i) for i in range(workers)]
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.stable_s = stable_s
        self.poll_s = poll_s
        self.stopping: int | None = None  # the signal that asked for the stop
        self.failed: int | None = None  # a start-up failure's exit code
        self.restarts = 0

    def run(self) -> int:
        """Start the workers, supervise them until a stop; the exit code."""
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for slot in self.slots:
                if self.stopping is None:
                    self._start(slot)
            while not self._all_done():
                self._step()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.failed is not None:
            return self.failed
        return max((s.exit_code for s in self.slots), default=0)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stop(signum)

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Forward ``signum`` to every live worker; restart nothing from now on."""
        if self.stopping is None:
            self.stopping = signum
        for slot in self.slots:
            slot.restart_at = None
            if slot.proc is not None and slot.proc.pid is not None and slot.proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.proc.pid, signum)

    def _all_done(self) -> bool:
        return self.stopping is not None and all(s.proc is None for s in self.slots)

    def _start(self, slot: _Slot) -> None:
        rx, tx = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=self.target, args=(slot.index, tx),
                                name=f"tokenplane-w{slot.index}")
        proc.start()
        tx.close()  # the child holds its end; EOF here once it exits
        slot.proc, slot.ready_rx = proc, rx
        slot.started_at, slot.restart_at = time.monotonic(), None

    def _step(self) -> None:
        now = time.monotonic()
        due = [s.restart_at for s in self.slots if s.restart_at is not None]
        timeout = max(0.0, min([self.poll_s, *(t - now for t in due)]))
        waitables: list[object] = []
        for s in self.slots:
            if s.proc is not None:
                waitables.append(s.proc.sentinel)
            if s.ready_rx is not None:
                waitables.append(s.ready_rx)
        if waitables:
            wait(waitables, timeout)  # type: ignore[arg-type]
        elif timeout > 0:
            time.sleep(timeout)
        for s in self.slots:
            self._check_ready(s)
            self._check_exit(s)
        if self.on_all_serving is not None and all(s.served for s in self.slots):
            announce, self.on_all_serving = self.on_all_serving, None
            if self.stopping is None:
                announce("")
        now = time.monotonic()
        for s in self.slots:
            if s.restart_at is not None and s.restart_at <= now and self.stopping is None:
                self.restarts += 1
                log.warning("restarting worker w%d (restart %d)", s.index, self.restarts)
                self._start(s)

    @staticmethod
    def _check_ready(slot: _Slot) -> None:
        rx = slot.ready_rx
        if rx is None or not rx.poll():
            return
        try:
            rx.recv_bytes()
            slot.served = True
        except EOFError:
            pass  # it exited before it served: its sentinel tells
        rx.close()
        slot.ready_rx = None

    def _check_exit(self, slot: _Slot) -> None:
        proc = slot.proc
        if proc is None or proc.is_alive():
            return
        code = proc.exitcode if proc.exitcode is not None else 0
        pid = proc.pid
        slot.proc, slot.exit_code = None, code
        if slot.ready_rx is not None:
            slot.ready_rx.close()
            slot.ready_rx = None
        proc.close()
        if self.stopping is not None:
            return
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        if not slot.served:
            # never served, first generation: the gateway cannot start (config, port)
            log.error("worker w%d (pid %s) failed to start (%s); stopping the gateway",
                      slot.index, pid, how)
            self.failed = code if code > 0 else 1
            self.stop(signal.SIGTERM)
            return
        lived = time.monotonic() - slot.started_at
        slot.quick_deaths = slot.quick_deaths + 1 if lived < self.stable_s else 1
        delay = min(self.backoff_max_s,
                    self.backoff_initial_s * 2 ** (slot.quick_deaths - 1))
        slot.restart_at = time.monotonic() + delay
        log.error("worker w%d (pid %s) died (%s) after %.1f s; restarting it in %.2f s",
                  slot.index, pid, how, lived, delay)
