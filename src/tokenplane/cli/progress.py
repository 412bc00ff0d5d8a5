"""Progress of the CLI's long work (simulate, replay, plan, report, advise) on standard
error, so standard output stays the result: a live line with a spinner, the step and
elapsed time (and a bar when the number of steps is known) on a terminal; plain
timestamped lines otherwise (CI logs, pipes), one per step."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID


class Progress:
    def __init__(self, title: str, total: int | None = None, *,
                 stream: TextIO | None = None, live: bool | None = None) -> None:
        self.title = title
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._t0 = time.monotonic()
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Progress:
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
            bar.start()
            self._task = bar.add_task(self.title, total=self.total)
            self._bar = bar
        else:
            self._line(self.title + (f" ({self.total} steps)" if self.total else ""))
        return self

    def step(self, message: str, advance: int = 1) -> None:
        """One more step done (``advance`` 0: a message about the step under way)."""
        self.done += advance
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
        if self._bar is not None:
            self._bar.stop()
        elif exc_type is None:
            self._line(f"{self.title}: done")
