"""Event factories shared by the metering tests."""

from __future__ import annotations

from typing import Any

from tokenplane.metering.events import UsageEvent


def make_event(i: int, **attrs: Any) -> UsageEvent:
    base: dict[str, Any] = {
        "request_id": f"req-{i}",
        "attempt": 0,
        "ts": 1_700_000_000.0 + i,
        "tenant": f"t{i % 3}",
        "department": "d",
        "app": f"app{i % 2}",
        "key_id": "k1",
        "model": "gpt-x",
        "input_system": 10,
        "input_user": 5,
        "input_tokens": 15,
        "output_tokens": 7,
    }
    base.update(attrs)
    return UsageEvent(**base)
