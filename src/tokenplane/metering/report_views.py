"""Derived columns shared by the usage CLI and the admin usage API."""

from __future__ import annotations

from typing import Any


def add_cacheable_tokens(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fingerprint rows gain ``tokens_per_request`` (the prompt's size) and
    ``cacheable_tokens``: the system-prompt tokens of every repeat after the first,
    which a prefix cache could have served."""
    for row in rows:
        requests = int(row.get("requests") or 0)
        total = int(row.get("system_tokens") or 0)
        per = total // requests if requests else 0
        row["tokens_per_request"] = per
        row["cacheable_tokens"] = total - per if requests else 0
    return rows
