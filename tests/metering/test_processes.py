"""Several processes on one data dir, and a writer killed with SIGKILL mid-stream."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from tests.metering.factories import make_event
from tokenplane.metering.journal.journal import Journal
from tokenplane.metering.meter import Meter
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink

WORKER = Path(__file__).with_name("writer_proc.py")
REPO = Path(__file__).resolve().parents[2]


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


async def ledger_counts(sink: LedgerSink) -> tuple[int, int]:
    rows = await sink.fetch("SELECT COUNT(*) AS n FROM usage_events")
    rollup = await sink.fetch(
        "SELECT CAST(SUM(requests) AS BIGINT) AS n FROM usage_rollups WHERE grain = 'minute'"
    )
    return int(rows[0]["n"]), int(rollup[0]["n"] or 0)


async def test_kill_9_loses_no_acknowledged_event(tmp_path: Path, sink_target: str) -> None:
    proc = spawn("ack", str(tmp_path), sink_target, "crash")
    assert proc.stdout is not None
    acked: list[str] = []
    while len(acked) < 600:
        line = proc.stdout.readline()
        assert line, "writer exited early"
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate()
    # lines printed before the kill were acknowledged too; a cut-off last line was not
    acked.extend(x for x in rest.split("\n")[:-1] if x)
    assert proc.returncode == -signal.SIGKILL

    meter = Meter(tmp_path, sink_target)
    await meter.start()  # replays the dead writer's journal
    await meter.close()
    sink = await open_sink(sink_target)
    try:
        stored = {r["request_id"] for r in await sink.fetch("SELECT request_id FROM usage_events")}
        assert set(acked) <= stored
        rows, rolled = await ledger_counts(sink)
        assert rows == len(stored) and rolled == rows  # nothing counted twice
    finally:
        await sink.close()


async def test_two_writer_processes_share_a_data_dir(tmp_path: Path, sink_target: str) -> None:
    target = sink_target
    procs = [spawn("write", str(tmp_path), target, p, "600") for p in ("a", "b")]
    for p in procs:  # both are started (each holds its writer id) before either writes
        assert p.stdout is not None
        assert p.stdout.readline().startswith("ready")
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = [p.communicate()[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    stats = [orjson.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert {s["writer_id"] for s in stats} == {"w0", "w1"}
    assert [s["flushed"] for s in stats] == [600, 600]
    sink = await open_sink(target)
    try:
        assert await ledger_counts(sink) == (1200, 1200)
    finally:
        await sink.close()


async def test_racing_processes_adopt_an_orphan_journal_once(
    tmp_path: Path, sink_target: str
) -> None:
    journal = Journal(tmp_path, "w0")
    journal.open()
    await asyncio.gather(*(journal.append(make_event(i)) for i in range(300)))
    journal.close()  # its owner is gone: 300 events nobody flushed
    target = sink_target
    procs = [spawn("adopt", str(tmp_path), target) for _ in range(2)]
    outputs = [p.communicate()[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    recovered = [orjson.loads(out.strip().splitlines()[-1])["recovered"] for out in outputs]
    assert sum(recovered) == 300  # one of them replayed it, the other found it flushed or owned
    sink = await open_sink(target)
    try:
        assert await ledger_counts(sink) == (300, 300)
    finally:
        await sink.close()
