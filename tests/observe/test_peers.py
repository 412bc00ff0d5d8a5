"""The workers' exchange of metrics: unix sockets only the gateway's user can open, a
short path when the data directory is deep, a silent sibling left out quickly."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from tokenplane.observe.peers import MetricsPeers, clear_last, read_last


async def _exchange(run: Path) -> None:
    a = MetricsPeers(run, 0, 3, lambda: b"from-w0")
    b = MetricsPeers(run, 1, 3, lambda: b"from-w1")
    await a.start()
    await b.start()
    try:
        assert len(a.path.encode()) <= 100
        assert stat.S_IMODE(os.stat(a.path).st_mode) == 0o600
        t0 = time.monotonic()
        assert await a.fetch() == [("w1", b"from-w1"), ("w2", None)]  # w2: never started
        assert await b.fetch() == [("w0", b"from-w0"), ("w2", None)]
        assert time.monotonic() - t0 < 1.0
    finally:
        await a.close()
        await b.close()
    assert not os.path.exists(a.path)


async def test_siblings_answer_each_other(tmp_path: Path) -> None:
    await _exchange(tmp_path / "run")


async def test_a_deep_data_directory_still_works(tmp_path: Path) -> None:
    await _exchange(tmp_path / ("d" * 120) / "run")


async def test_last_answers_are_kept_and_cleared(tmp_path: Path) -> None:
    run = tmp_path / "run"
    a = MetricsPeers(run, 0, 2, lambda: b"")
    await a.start()
    a.save_last(b"counts")
    await a.close()
    assert read_last(run, "w0") == b"counts"
    again = MetricsPeers(run, 0, 2, lambda: b"")
    await again.start()
    assert again.inherited == b"counts"  # a replacement of w0 carries them on
    await again.close()
    clear_last(run)
    assert read_last(run, "w0") is None
