"""The record of the autoscaler's decisions: in memory (bounded) and on disk.

Every decision that changes a pool (serving or warm count) is kept in a bounded
in-memory log (``autoscale.decisions_kept``, newest last) for the admin API, and
appended as one JSON line to ``<data_dir>/autoscale/decisions.jsonl`` (rotated to
``decisions.jsonl.1`` past ``max_bytes``), where ``tokenplane autoscale status``
reads it without a running gateway. The latest decision of each pool, changed or
not, is kept too: it carries the inputs the policy read last.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tokenplane.autoscale.model import ScaleDecision

FILE = "decisions.jsonl"
MAX_BYTES = 16 * 1024 * 1024


def decision_dict(d: ScaleDecision, wall: float, policy: str) -> dict[str, Any]:
    return {
        "pool": d.pool, "at": wall, "policy": policy,
        "serving_from": d.serving_from, "serving_to": d.serving_to,
        "warm_from": d.warm_from, "warm_to": d.warm_to,
        "direction": {1: "up", -1: "down", 0: "none"}[d.direction],
        "reasons": list(d.reasons),
        "inputs": {k: round(float(v), 6) for k, v in d.inputs.items()},
    }


def log_dir(home: Path) -> Path:
    return home / "autoscale"


class DecisionLog:
    def __init__(self, home: Path | None, kept: int = 500, max_bytes: int = MAX_BYTES) -> None:
        self.home = home
        self.dir = log_dir(home) if home is not None else None
        self.max_bytes = max_bytes
        self.recent: deque[dict[str, Any]] = deque(maxlen=kept)
        self.latest: dict[str, dict[str, Any]] = {}
        self.recorded = 0

    def record(self, d: ScaleDecision, wall: float, policy: str) -> dict[str, Any]:
        row = decision_dict(d, wall, policy)
        self.latest[d.pool] = row
        if d.changed:
            self.recent.append(row)
            self.recorded += 1
            self._append(row)
        return row

    def _append(self, row: dict[str, Any]) -> None:
        if self.dir is None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / FILE
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size > self.max_bytes:
                os.replace(path, self.dir / (FILE + ".1"))
        with path.open("ab") as f:
            f.write(orjson.dumps(row) + b"\n")


def read_decisions(home: Path, pool: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The last ``limit`` recorded decisions (of ``pool``), oldest first."""
    out: deque[dict[str, Any]] = deque(maxlen=limit)
    for row in _rows(log_dir(home)):
        if pool is None or row.get("pool") == pool:
            out.append(row)
    return list(out)


def _rows(d: Path) -> Iterator[dict[str, Any]]:
    for name in (FILE + ".1", FILE):
        path = d / name
        if not path.exists():
            continue
        with path.open("rb") as f:
            for line in f:
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError:  # a line cut by a crash
                    continue
                if isinstance(row, dict):
                    yield row
