"""Progress of the CLI's long work (simulate, replay, plan, report, advise, audit
verify, usage) on standard error, so standard output stays the result: a live line
with a spinner, the step and elapsed time (and a bar when the number of steps is
known) when standard error is a terminal; nothing when it is not (a pipe, a file, a
CI log), unless ``$TOKENPLANE_PROGRESS=plain`` asks for plain timestamped lines, one
per step."""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


PLAIN_ENV = "TOKENPLANE_PROGRESS"
DELAY_ENV = "TOKENPLANE_PROGRESS_DELAY"  # seconds before a terminal's live line shows
DELAY_S = 2.0  # work shorter than this shows no progress at all


class Progress:
    """``live``: True a live line, False plain lines; None (the default) chooses: live
    on a terminal (shown once the work has taken ``DELAY_S``, so quick commands print
    nothing), else plain lines if ``$TOKENPLANE_PROGRESS`` is ``plain``, else quiet."""

    def __init__(self, title: str, total: int | None = None, *,
                 stream: TextIO | None = None, live: bool | None = None) -> None:
        self.title = title
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        tty = _isatty(self.stream)
        self.live = tty if live is None else live
        self.quiet = live is None and not tty and os.environ.get(PLAIN_ENV) != "plain"
        self.delay_s = _delay() if live is None else 0.0
        self._t0 = time.monotonic()
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Progress:
        if self.quiet:
            return self
        if self.live:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                ProgressColumn,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                columns += [BarColumn(), MofNCompleteColumn()]
            bar = RichProgress(*columns, TimeElapsedColumn(),
                               console=Console(file=self.stream), transient=False)
            self._task = bar.add_task(self.title, total=self.total)
            self._bar = bar
            if self.delay_s > 0:
                self._timer = threading.Timer(self.delay_s, bar.start)
                self._timer.daemon = True
                self._timer.start()
            else:
                bar.start()
        else:
            self._line(self.title + (f" ({self.total} steps)" if self.total else ""))
        return self

    def step(self, message: str, advance: int = 1) -> None:
        """One more step done (``advance`` 0: a message about the step under way)."""
        self.done += advance
        if self.quiet:
            return
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=advance,
                             description=f"{self.title}: {message}")
        else:
            count = f"{self.done}/{self.total} " if self.total is not None and advance else ""
            self._line(f"{count}{message}")

    def _line(self, text: str) -> None:
        self.stream.write(f"[{time.monotonic() - self._t0:7.1f}s] {text}\n")
        self.stream.flush()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()  # started or not: never left starting after the stop
        if self._bar is not None:
            if self._bar.live.is_started:
                self._bar.stop()
        elif exc_type is None and not self.quiet:
            self._line(f"{self.title}: done")


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get(DELAY_ENV, DELAY_S)))
    except ValueError:
        return DELAY_S


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a file
        return False
