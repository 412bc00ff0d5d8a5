"""Key lifetimes as people write them: ``90d``, ``12h``, ``30m``, ``45s``, ``2w``
(or plain seconds). Pure."""

from __future__ import annotations

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_S = 10 * 365 * 86400  # ten years: beyond that, no expiry is the honest setting


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError (saying what is accepted) if not a duration."""
    raw = text.strip().lower()
    unit = raw[-1:] if raw[-1:] in UNITS else "s"
    number = raw[:-1] if raw[-1:] in UNITS else raw
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (e.g. 90d, 12h, 30m, 45s, 2w)") from None
    seconds = value * UNITS[unit]
    if not 0 < seconds <= MAX_S or seconds != seconds:
        raise ValueError(f"{text!r}: a duration must be above 0 and at most ten years")
    return seconds
