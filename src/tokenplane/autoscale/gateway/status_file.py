"""``<data_dir>/autoscale/status.json``: the controller's status as of its last round
(replaced whole each round), for ``tokenplane autoscale status`` without a gateway to
ask. With several worker processes the last one to finish a round wrote it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from tokenplane.autoscale.gateway.decision_log import log_dir

FILE = "status.json"


def write_status(home: Path, status: dict[str, Any]) -> None:
    d = log_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{FILE}.{os.getpid()}"
    tmp.write_bytes(orjson.dumps(status, option=orjson.OPT_INDENT_2))
    os.replace(tmp, d / FILE)


def read_status(home: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads((log_dir(home) / FILE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
