"""The ``x_anthropic`` extension key: Anthropic-only details of a request that ride
along in the canonical chat body so that they survive a round trip to an Anthropic
backend. It is found on the body, on a message, on a content part or on a tool, and
nowhere else; :func:`strip_extensions` takes it off before a body goes to a backend
that speaks OpenAI."""

from __future__ import annotations

from typing import Any

from tokenplane.dialects.extensions import strip_extensions

__all__ = ["EXT", "ext", "strip_extensions"]

EXT = "x_anthropic"


def ext(d: dict[str, Any]) -> dict[str, Any]:
    """The extension dict on ``d`` (empty when absent or not a dict)."""
    x = d.get(EXT)
    return x if isinstance(x, dict) else {}
