"""A session store that fails (Redis unreachable) is the gateway's fault: a JSON-RPC
error with 503 and ``retry-after``, never a bare 500."""

from __future__ import annotations

import orjson
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from tests.gateway.harness import free_port
from tokenplane.auth.principal import Principal
from tokenplane.config.mcp_schema import McpConfig
from tokenplane.mcp.gateway.metrics import McpMetrics
from tokenplane.mcp.gateway.result_guard import Accounting
from tokenplane.mcp.gateway.service import Caller, McpService
from tokenplane.mcp.gateway.sessions import RedisSessions
from tokenplane.mcp.gateway.upstream import HttpUpstream
from tokenplane.mcp.policy import McpPolicy
from tokenplane.tokens.registry import TokenizerRegistry


async def test_redis_down_is_a_503_in_json_rpc() -> None:
    cfg = McpConfig.model_validate({"servers": [{"name": "fs", "url": "http://127.0.0.1:9/mcp"}],
                                    "rules": [{"allow": ["fs__*"]}]})
    dead = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    tok = TokenizerRegistry().get("tiktoken:cl100k_base")
    service = McpService(McpPolicy(cfg), {"fs": HttpUpstream(cfg.servers[0])},
                         RedisSessions(dead, "tp:test:down:", 60),
                         Accounting(lambda _: "m", lambda _t, _a: True, lambda _: tok),
                         McpMetrics(CollectorRegistry()))
    who = Caller(Principal("key_1", "t"), None)
    init = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {}})
    try:
        reply = await service.post(who, init)
        assert reply.status == 503 and reply.headers["retry-after"] == "1"
        assert reply.body is not None and reply.body["id"] == 7
        assert reply.body["error"]["code"] == -32603
        later = Caller(Principal("key_1", "t"), None, session_id="abc")
        assert (await service.delete(later)).status == 503
    finally:
        await service.close()
