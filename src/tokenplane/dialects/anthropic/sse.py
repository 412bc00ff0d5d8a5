"""One server-sent event frame as Anthropic's streams write them."""

from __future__ import annotations

from typing import Any

import orjson


def frame(event: str, data: dict[str, Any]) -> bytes:
    """``event: <type>\\ndata: <compact json>\\n\\n``."""
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
