"""The MCP service of one worker, from the ``mcp`` config and the gateway's parts."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry
from redis import asyncio as aioredis

from tokenplane.config.schema import GatewayConfig
from tokenplane.governance.audit.service import AuditService
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.mcp.gateway.metrics import McpMetrics
from tokenplane.mcp.gateway.rates import LocalRates, RateStore, RedisRates
from tokenplane.mcp.gateway.result_guard import Accounting
from tokenplane.mcp.gateway.service import McpService
from tokenplane.mcp.gateway.sessions import MemorySessions, RedisSessions, SessionStore
from tokenplane.mcp.gateway.upstream import HttpUpstream, StdioUpstream, Upstream
from tokenplane.mcp.policy import McpPolicy
from tokenplane.tokens.base import Tokenizer


class McpParts:
    """The worker's MCP service (its upstreams' connections and processes closed with
    it)."""

    def __init__(self, service: McpService) -> None:
        self.service = service

    async def close(self) -> None:
        await self.service.close()


def build_mcp(config: GatewayConfig, registry: CollectorRegistry,
              allowed_models: Callable[[str], set[str] | None],
              tokenizer: Callable[[str], Tokenizer], guards: GuardPolicies | None,
              audit: AuditService | None) -> McpParts | None:
    cfg = config.mcp
    if cfg is None:
        return None
    policy = McpPolicy(cfg)
    upstreams: dict[str, Upstream] = {}
    for s in cfg.servers:
        upstreams[s.name] = HttpUpstream(s) if s.url is not None else StdioUpstream(s)
    sessions: SessionStore
    local = LocalRates(policy.longest_window_s)
    rates: RateStore = local
    if cfg.sessions == "redis":  # sessions and rate windows shared by the replicas
        assert config.redis_url is not None
        client = aioredis.Redis.from_url(config.redis_url, socket_timeout=2.0,
                                         socket_connect_timeout=2.0)
        sessions = RedisSessions(client, config.admission.key_prefix, cfg.session_ttl_s)
        rates = RedisRates(client, config.admission.key_prefix, local)
    else:
        sessions = MemorySessions(cfg.session_ttl_s)
    aliases = [m.alias for m in config.models]

    def default_model(tenant: str) -> str | None:
        allowed = allowed_models(tenant)
        return next((a for a in aliases if allowed is None or a in allowed), None)

    def may_use(tenant: str, alias: str) -> bool:
        allowed = allowed_models(tenant)
        return alias in aliases and (allowed is None or alias in allowed)

    service = McpService(policy, upstreams, sessions,
                         Accounting(default_model, may_use, tokenizer), McpMetrics(registry),
                         guards, audit.submit if audit is not None else None, rates=rates)
    return McpParts(service)
