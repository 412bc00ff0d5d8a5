"""Field checks shared by the config sections (messages as `config check` prints them)."""

from __future__ import annotations

from urllib.parse import urlparse


def http_url(v: str | None) -> str | None:
    """An http(s) URL with a host, or None."""
    if v is None:
        return v
    parsed = urlparse(v)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError("not a URL")
    return v


def env_name(v: str | None) -> str | None:
    """The name of an environment variable (secrets are referenced, never written)."""
    if v is not None and (not v or not v.replace("_", "A").isalnum()):
        raise ValueError("must be an environment variable name, not a key")
    return v
