"""Tool-call permissions: which tools a tenant / app may define and call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tokenplane.governance.errors import PolicyViolation


class ToolMode(StrEnum):
    REJECT = "reject"  # a request defining a disallowed tool gets a 400
    STRIP = "strip"  # disallowed tool definitions are removed before the upstream


class ToolNotAllowed(PolicyViolation):
    """A 400 (request) or 403-style block (response) naming the disallowed tools."""

    def __init__(self, names: list[str], *, in_response: bool = False) -> None:
        self.names = names
        where = "model called" if in_response else "request defines"
        super().__init__(
            400 if not in_response else 403,
            f"{where} tools not allowed by policy: {', '.join(names)}",
            code="tool_not_allowed",
            param=None if in_response else "tools",
        )


def tool_name(tool: Mapping[str, Any]) -> str:
    """Name of a tool definition or a tool call (OpenAI ``function`` shape, or ``name``)."""
    fn = tool.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        return str(fn["name"])
    name = tool.get("name")
    return name if isinstance(name, str) else ""


@dataclass(frozen=True)
class ToolPolicy:
    """``allowed`` None means every tool is allowed."""

    allowed: frozenset[str] | None = None
    mode: ToolMode = ToolMode.REJECT

    def __post_init__(self) -> None:
        # Accept plain sets / strings from configuration.
        if self.allowed is not None and not isinstance(self.allowed, frozenset):
            object.__setattr__(self, "allowed", frozenset(self.allowed))
        object.__setattr__(self, "mode", ToolMode(self.mode))

    @classmethod
    def of(
        cls, allowed: Iterable[str] | None, mode: ToolMode | str = ToolMode.REJECT
    ) -> ToolPolicy:
        return cls(frozenset(allowed) if allowed is not None else None, ToolMode(mode))

    def permits(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed

    def check_request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The request body to send upstream: unchanged, or with disallowed tools
        stripped (``tool_choice`` naming a stripped tool falls back to ``auto``,
        or is dropped when no tools remain). Raises ToolNotAllowed in reject mode."""
        tools = body.get("tools")
        if self.allowed is None or not isinstance(tools, list):
            return dict(body)
        named = [tool_name(t) for t in tools if isinstance(t, Mapping)]
        denied = [n for n in named if not self.permits(n)]
        if not denied:
            return dict(body)
        if self.mode is ToolMode.REJECT:
            raise ToolNotAllowed(denied)
        kept = [t for t in tools if isinstance(t, Mapping) and self.permits(tool_name(t))]
        out = dict(body)
        choice = out.get("tool_choice")
        if kept:
            out["tools"] = kept
            if isinstance(choice, Mapping) and not self.permits(tool_name(choice)):
                out["tool_choice"] = "auto"
        else:
            out.pop("tools", None)
            out.pop("tool_choice", None)
            out.pop("parallel_tool_calls", None)
        return out

    def denied_calls(self, tool_calls: Iterable[Mapping[str, Any]] | None) -> list[str]:
        """Names of disallowed tools among a response's ``tool_calls``."""
        if self.allowed is None or not tool_calls:
            return []
        return [tool_name(c) for c in tool_calls if not self.permits(tool_name(c))]

    def check_response(self, message: Mapping[str, Any]) -> None:
        """Raise ToolNotAllowed when an assistant message calls a disallowed tool."""
        denied = self.denied_calls(message.get("tool_calls"))
        if denied:
            raise ToolNotAllowed(denied, in_response=True)
