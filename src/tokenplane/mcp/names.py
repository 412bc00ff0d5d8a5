"""Names on the aggregated ``/mcp`` endpoint: ``server__tool`` for tools and prompts,
``mcp+server:<uri>`` for resources. Server names hold no ``__`` (config), so the first
``__`` splits a name."""

from __future__ import annotations

SEP = "__"
URI_PREFIX = "mcp+"


def qualify(server: str, name: str) -> str:
    return f"{server}{SEP}{name}"


def split(qualified: str) -> tuple[str, str] | None:
    """(server, name) of ``server__name``; None when it names no server."""
    server, sep, name = qualified.partition(SEP)
    if not sep or not server or not name:
        return None
    return server, name


def qualify_uri(server: str, uri: str) -> str:
    return f"{URI_PREFIX}{server}:{uri}"


def split_uri(qualified: str) -> tuple[str, str] | None:
    """(server, uri) of ``mcp+server:uri``; None otherwise."""
    if not qualified.startswith(URI_PREFIX):
        return None
    server, sep, uri = qualified[len(URI_PREFIX):].partition(":")
    if not sep or not server or not uri:
        return None
    return server, uri
