"""The journal's power-loss window under ``metering.ack: written``: how long one group
``fdatasync`` of a journal batch takes on this disk (records written during the sync
in flight and the next one are what a power loss can take).

    python bench/bench_fsync.py [--syncs 2000] [--records 8] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import orjson


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--syncs", type=int, default=2000)
    ap.add_argument("--records", type=int, default=8, help="records (400 B) per sync")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        fd = os.open(Path(tmp) / "segment", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        record, times = b"x" * 400, []
        try:
            for _ in range(args.syncs):
                for _ in range(args.records):
                    os.write(fd, record)
                t0 = time.perf_counter()
                os.fdatasync(fd)
                times.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
    times.sort()
    n = len(times)
    ms = {"p50": times[n // 2], "p99": times[int(n * 0.99)], "max": times[-1]}
    print(orjson.dumps({"bench": "fsync", "syncs": n, "records_per_sync": args.records,
                        **{f"{k}_ms": round(v * 1e3, 3) for k, v in ms.items()},
                        "window_p99_ms": round(2 * ms["p99"] * 1e3, 3)},
                       option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
