"""A worker process for the multi-process metering tests (run as a script).

Modes:
  ack   DATA_DIR SINK PREFIX          record events forever; print each id once durable
  write DATA_DIR SINK PREFIX COUNT    print "ready", wait for a line on stdin, record COUNT
                                      events, close (drain), print stats JSON
  adopt DATA_DIR SINK                 start (replaying orphans), print stats JSON, close
"""

from __future__ import annotations

import asyncio
import sys

import orjson

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.meter import Meter


def event(prefix: str, i: int) -> UsageEvent:
    return UsageEvent(
        request_id=f"{prefix}-{i}",
        attempt=0,
        ts=1_700_000_000.0 + i,
        tenant=f"t{i % 3}",
        app="app",
        model="gpt-x",
        input_system=3,
        input_user=4,
        input_tokens=7,
        output_tokens=2,
    )


async def ack(data_dir: str, sink: str, prefix: str) -> None:
    meter = Meter(data_dir, sink, flush_max_rows=50)
    await meter.start()
    out = sys.stdout
    i = 0
    while True:
        ids = [f"{prefix}-{i + k}" for k in range(20)]
        futs = [meter.record(event(prefix, i + k)) for k in range(20)]
        i += 20
        await asyncio.gather(*futs)
        out.write("\n".join(ids) + "\n")
        out.flush()


async def write(data_dir: str, sink: str, prefix: str, count: int) -> None:
    meter = Meter(data_dir, sink, flush_max_rows=100)
    await meter.start()
    sys.stdout.write(f"ready {meter.writer_id}\n")
    sys.stdout.flush()
    sys.stdin.readline()  # wait for "go": the parent starts all writers together
    for start in range(0, count, 50):
        await asyncio.gather(*(meter.record(event(prefix, i)) for i in range(start, start + 50)))
    await meter.close()
    sys.stdout.write(orjson.dumps(meter.stats().as_dict()).decode() + "\n")


async def adopt(data_dir: str, sink: str) -> None:
    meter = Meter(data_dir, sink)
    await meter.start()
    await meter.close()
    sys.stdout.write(orjson.dumps(meter.stats().as_dict()).decode() + "\n")


def main(argv: list[str]) -> None:
    mode = argv[0]
    if mode == "ack":
        asyncio.run(ack(argv[1], argv[2], argv[3]))
    elif mode == "write":
        asyncio.run(write(argv[1], argv[2], argv[3], int(argv[4])))
    elif mode == "adopt":
        asyncio.run(adopt(argv[1], argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
