"""Server-sent events as OpenAI frames them."""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def frame(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def payload(event: bytes) -> bytes | None:
    """The JSON payload of a ``data:`` event, None for [DONE], comments and others."""
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data == b"[DONE]":
                return None
            return data
    return None
