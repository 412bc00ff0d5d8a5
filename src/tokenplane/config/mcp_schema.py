"""Config section of the MCP gateway (docs/MCP.md): the upstream tool servers, who may
call which of their tools, and the limits per tool."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# a server's name is a namespace: ``server__tool``; no "__" inside, nothing a URI
# scheme (``mcp+server:``) could not hold
SERVER_NAME = r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolRateConfig(_Strict):
    """At most ``calls`` calls of the tool in any ``per_s`` seconds, counted ``by``
    key, tenant or for everyone (per replica)."""

    calls: int = Field(ge=1)
    per_s: float = Field(gt=0, le=86_400)
    by: Literal["key", "tenant", "all"] = "key"


class McpToolConfig(_Strict):
    """What the gateway does with one upstream tool. ``max_result_tokens``: a result
    over this many tokens (in the accounting model's tokenizer) is truncated (head and
    tail kept around a marker) or refused (``overflow``); ``destructive``: the call goes
    through ``mcp.destructive``'s policy; ``rate`` and ``max_concurrent``: limits per
    tool (per replica)."""

    max_result_tokens: int | None = Field(None, ge=16)
    overflow: Literal["truncate", "refuse"] = "truncate"
    destructive: bool = False
    rate: ToolRateConfig | None = None
    max_concurrent: int | None = Field(None, ge=1)


class McpServerConfig(_Strict):
    """One upstream MCP server: ``url`` (streamable HTTP) or ``command`` (a local stdio
    server the gateway launches), never both. ``headers_env`` maps a header name to the
    environment variable holding its value (credentials stay out of the file);
    ``timeout_s`` bounds every call to it."""

    name: str = Field(pattern=SERVER_NAME, max_length=64)
    url: str | None = None
    command: list[str] | None = Field(None, min_length=1)
    headers_env: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0, le=3600)
    tools: dict[str, McpToolConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError(f"mcp server {self.name!r}: set exactly one of url and command")
        if self.url is not None and not re.match(r"^https?://[^/\s]+", self.url):
            raise ValueError(f"mcp server {self.name!r}: url must be http(s)://host/...")
        return self


class ArgumentRuleConfig(_Strict):
    """A check on one argument of the tools ``tool`` names (a glob on
    ``server__tool``): ``pattern`` (a regex the string value must match from its
    start), ``json_schema`` (a JSON Schema subset: type, enum, const, minimum, maximum,
    minLength, maxLength, pattern, items, properties, required), ``required``: the
    argument must be present."""

    tool: str = Field(min_length=1)
    argument: str = Field(min_length=1)
    pattern: str | None = None
    json_schema: dict[str, Any] | None = None
    required: bool = False

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return v


class McpRuleConfig(_Strict):
    """Who the rule is for (every field set must match: tenant, department, app, key
    id; none set: everyone) and what it says: ``allow`` and ``deny`` are globs on
    ``server__name`` (tools and prompts by name, resources by URI; ``fs__*`` is all of
    server ``fs``); a name is callable when a matching rule allows it and none denies
    it. ``arguments``: checks on tool arguments."""

    tenant: str | None = None
    department: str | None = None
    app: str | None = None
    key: str | None = None
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    arguments: list[ArgumentRuleConfig] = Field(default_factory=list)


class McpConfig(_Strict):
    """The MCP gateway at ``/mcp`` (every server a key may use, names ``server__tool``)
    and ``/mcp/{server}``. ``sessions``: where session ids live (``redis`` needs
    ``redis_url``: any replica continues a session); ``session_ttl_s`` since last use;
    ``max_message_bytes``: a larger JSON-RPC message is refused naming the limit;
    ``destructive``: tools marked destructive are refused (``deny``), need the client's
    confirmation in ``params._meta["tokenplane/confirm"]`` (``confirm``) or pass
    (``allow``); ``accounting_model``: the alias whose tokenizer counts results (default:
    the first model the tenant may use; a client may name one in
    ``x-tokenplane-model``); ``list_ttl_s``: how long an upstream's lists are reused."""

    servers: list[McpServerConfig] = Field(min_length=1)
    rules: list[McpRuleConfig] = Field(default_factory=list)
    sessions: Literal["memory", "redis"] = "memory"
    session_ttl_s: float = Field(3600.0, gt=0)
    max_message_bytes: int = Field(1024 * 1024, ge=1024)
    destructive: Literal["deny", "confirm", "allow"] = "confirm"
    accounting_model: str | None = None
    list_ttl_s: float = Field(30.0, ge=0)

    @model_validator(mode="after")
    def _unique_names(self) -> McpConfig:
        names = [s.name for s in self.servers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate mcp server names {dup}")
        return self
