"""Test helpers: Messages SSE frames parsed, checked with the anthropic SDK's event
types and accumulated with its own accumulator."""

from __future__ import annotations

from typing import Any

import orjson
import pytest


def _sdk() -> tuple[Any, Any]:
    """The anthropic SDK (installed beside the dev tools, not a declared dependency:
    the tests that need it are skipped without it) and the event type adapter."""
    anthropic = pytest.importorskip("anthropic")
    pydantic = pytest.importorskip("pydantic")
    return anthropic, pydantic.TypeAdapter(anthropic.types.RawMessageStreamEvent)


def frames(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    assert raw == b"" or raw.endswith(b"\n\n")
    out = []
    for part in raw.split(b"\n\n"):
        if not part:
            continue
        event_line, data_line = part.split(b"\n")
        assert event_line.startswith(b"event: ") and data_line.startswith(b"data: ")
        event = event_line[len(b"event: "):].decode()
        data = orjson.loads(data_line[len(b"data: "):])
        assert data["type"] == event
        out.append((event, data))
    return out


def checked(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The frames, each stream event validated by the SDK's types."""
    _, adapter = _sdk()
    parsed = frames(raw)
    for event, data in parsed:
        if event not in ("ping", "error"):
            adapter.validate_python(data)
    return parsed


def accumulate(raw: bytes) -> dict[str, Any]:
    """The message the SDK's stream accumulator builds from the frames."""
    anthropic, adapter = _sdk()
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for event, data in frames(raw):
        if event in ("ping", "error"):
            continue
        snapshot = accumulate_event(event=adapter.validate_python(data),
                                    current_snapshot=snapshot, json_bufs=bufs)
    result: dict[str, Any] = snapshot.to_dict()
    anthropic.types.Message.model_validate(result)
    return result
