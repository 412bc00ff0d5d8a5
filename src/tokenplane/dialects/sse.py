"""The ``data:`` payload of one server-sent event (the dialects parse the canonical
stream with it; policy code cannot import the upstream package's helper)."""

from __future__ import annotations


def event_payload(event: bytes) -> bytes | None:
    """The payload of a ``data:`` event; None for ``[DONE]``, comments and others."""
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            return None if data == b"[DONE]" else data
    return None
