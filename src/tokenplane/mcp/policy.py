"""Who may see and call what: the ``mcp`` config compiled once, each principal's
:class:`Permissions` computed on first use, and the checks of one ``tools/call``
(visibility, argument rules, the destructive-tool policy) in the order they apply."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tokenplane.auth.principal import Principal
from tokenplane.config.mcp_schema import McpConfig, McpRuleConfig, McpServerConfig
from tokenplane.mcp.arguments import ArgumentRule
from tokenplane.mcp.globs import GlobSet
from tokenplane.mcp.limits import RateRule
from tokenplane.mcp.names import qualify

CONFIRM_META = "tokenplane/confirm"
MEMO_MAX = 10_000


@dataclass(frozen=True)
class ToolSettings:
    max_result_tokens: int | None = None
    overflow: Literal["truncate", "refuse"] = "truncate"
    destructive: bool = False
    rate: RateRule | None = None
    rate_by: Literal["key", "tenant", "all"] = "key"
    max_concurrent: int | None = None


DEFAULT_TOOL = ToolSettings()


@dataclass(frozen=True)
class Denial:
    """A refused call: ``reason`` is for the agent; ``hidden``: the name must look
    unknown (the key may not see it)."""

    reason: str
    decision: str  # deny_hidden | deny_argument | deny_destructive | confirm_required
    hidden: bool = False


@dataclass
class Permissions:
    """One principal's view: a name (``server__name``) is visible when an allow glob
    matches and no deny glob does."""

    allow: GlobSet
    deny: GlobSet
    arguments: tuple[ArgumentRule, ...]
    _memo: dict[str, bool] = field(default_factory=dict)
    _servers: dict[str, bool] = field(default_factory=dict)

    def server_visible(self, server: str) -> bool:
        """Whether any allow glob can match a name of ``server`` (its names are
        ``server__...``); what the server holds is filtered name by name."""
        seen = self._servers.get(server)
        if seen is None:
            seen = self.allow.may_match_prefix(qualify(server, ""))
            self._servers[server] = seen
        return seen

    def visible(self, qualified: str) -> bool:
        seen = self._memo.get(qualified)
        if seen is None:
            seen = self.allow.matches(qualified) and not self.deny.matches(qualified)
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            self._memo[qualified] = seen
        return seen

    def argument_problem(self, qualified: str, arguments: Mapping[str, Any]) -> str | None:
        for rule in self.arguments:
            if rule.tools.matches(qualified):
                bad = rule.check(arguments)
                if bad:
                    return f"{bad} (rule on {rule.source})"
        return None


def _applies(rule: McpRuleConfig, p: Principal) -> bool:
    return ((rule.tenant is None or rule.tenant == p.tenant)
            and (rule.department is None or rule.department == p.department)
            and (rule.app is None or rule.app == p.app)
            and (rule.key is None or rule.key == p.key_id))


def _tool_settings(server: McpServerConfig) -> dict[str, ToolSettings]:
    out: dict[str, ToolSettings] = {}
    for name, t in server.tools.items():
        rate = RateRule(t.rate.calls, t.rate.per_s) if t.rate is not None else None
        out[name] = ToolSettings(t.max_result_tokens, t.overflow, t.destructive, rate,
                                 t.rate.by if t.rate is not None else "key", t.max_concurrent)
    return out


class McpPolicy:
    """The compiled ``mcp`` section."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self.servers: dict[str, McpServerConfig] = {s.name: s for s in config.servers}
        self._tools = {s.name: _tool_settings(s) for s in config.servers}
        self._cache: dict[tuple[str, str | None, str | None, str], Permissions] = {}
        self.longest_window_s = max(
            (t.rate.per_s for ts in self._tools.values() for t in ts.values()
             if t.rate is not None), default=0.0)

    def tool(self, server: str, tool: str) -> ToolSettings:
        return self._tools.get(server, {}).get(tool, DEFAULT_TOOL)

    def for_principal(self, p: Principal) -> Permissions:
        key = (p.tenant, p.department, p.app, p.key_id)
        perms = self._cache.get(key)
        if perms is None:
            perms = self._build(p)
            if len(self._cache) >= MEMO_MAX:
                self._cache.clear()
            self._cache[key] = perms
        return perms

    def _build(self, p: Principal) -> Permissions:
        rules = [r for r in self.config.rules if _applies(r, p)]
        args = tuple(
            ArgumentRule(GlobSet([a.tool]), a.argument,
                         re.compile(a.pattern) if a.pattern is not None else None,
                         a.json_schema, a.required, f"{a.tool}.{a.argument}")
            for r in rules for a in r.arguments)
        return Permissions(GlobSet(g for r in rules for g in r.allow),
                           GlobSet(g for r in rules for g in r.deny), args)

    def check_call(self, perms: Permissions, server: str, tool: str,
                   arguments: Mapping[str, Any], confirmed: bool) -> Denial | None:
        """Why this call may not go (None: it may)."""
        qualified = qualify(server, tool)
        if server not in self.servers or not perms.visible(qualified):
            return Denial(f"Unknown tool: {qualified}", "deny_hidden", hidden=True)
        bad = perms.argument_problem(qualified, arguments)
        if bad is not None:
            return Denial(f"{qualified}: {bad}", "deny_argument")
        if self.tool(server, tool).destructive:
            mode = self.config.destructive
            if mode == "deny":
                return Denial(f"{qualified} is marked destructive and this gateway refuses "
                              "destructive tools", "deny_destructive")
            if mode == "confirm" and not confirmed:
                return Denial(f"{qualified} is marked destructive: ask the user, then repeat "
                              f'the call with params._meta["{CONFIRM_META}"] = true',
                              "confirm_required")
        return None
