"""A server's list as one key sees it: only the names it may use, renamed
``server__name`` (``mcp+server:uri`` for resources) on the aggregated endpoint."""

from __future__ import annotations

from typing import Any

from tokenplane.mcp.names import qualify, qualify_uri
from tokenplane.mcp.policy import McpPolicy, Permissions

# list method -> the field of its result holding the items, and the items' name field
LISTS = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
}


def visible_items(policy: McpPolicy, perms: Permissions, server: str, method: str,
                  found: list[dict[str, Any]], scope: str | None) -> list[dict[str, Any]]:
    """The items of ``server``'s answer to ``method`` the key may use, named for the
    endpoint (``scope``: the server of ``/mcp/{server}``; None: the aggregated one).
    A tool with ``max_result_tokens`` loses its ``outputSchema`` (a cut result carries
    no ``structuredContent``); a tool marked destructive gets ``destructiveHint``."""
    key = LISTS[method][1]
    out: list[dict[str, Any]] = []
    tools = method == "tools/list"
    for item in found:
        name = item.get(key)
        if not isinstance(name, str) or not perms.visible(qualify(server, name)):
            continue
        if scope is None or tools:
            item = dict(item)
        if scope is None:
            item[key] = qualify_uri(server, name) if key != "name" else qualify(server, name)
        if tools:
            settings = policy.tool(server, name)
            if settings.max_result_tokens is not None:
                item.pop("outputSchema", None)
            if settings.destructive:  # what the gateway treats as destructive, said so
                hints = item.get("annotations")
                item["annotations"] = {**(hints if isinstance(hints, dict) else {}),
                                       "destructiveHint": True}
        out.append(item)
    return out
