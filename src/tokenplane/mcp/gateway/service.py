"""The MCP gateway: one JSON-RPC message of an authenticated client in, the answer out.

Sessions are the gateway's own (``initialize`` opens one, bound to the key; any
replica sharing the session store continues it); each upstream server is reached
through this worker's one session with it. Lists are filtered to what the key may call
and renamed ``server__name`` on the aggregated ``/mcp``; calls go through the checks of
``mcp/policy.py``, the rate and concurrency limits, the upstream (with its timeout),
the injection screen of the result and ``max_result_tokens``; every call is audited and
counted."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.exceptions import RedisError

from tokenplane.auth.principal import Principal
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.mcp import jsonrpc
from tokenplane.mcp.gateway.audit import McpAuditEntry
from tokenplane.mcp.gateway.catalog import Catalog
from tokenplane.mcp.gateway.metrics import McpMetrics
from tokenplane.mcp.gateway.rates import LocalRates, RateStore
from tokenplane.mcp.gateway.result_guard import Accounting, ResultGuard
from tokenplane.mcp.gateway.sessions import McpSession, SessionStore, new_session_id
from tokenplane.mcp.gateway.upstream import Upstream, UpstreamError
from tokenplane.mcp.jsonrpc import Message, RpcError
from tokenplane.mcp.limits import InFlight, RateRule
from tokenplane.mcp.listing import LISTS, visible_items
from tokenplane.mcp.names import qualify, split, split_uri
from tokenplane.mcp.policy import CONFIRM_META, McpPolicy, Permissions
from tokenplane.mcp.results import read_texts
from tokenplane.sessions.tool_links import result_digest

log = logging.getLogger("tokenplane.mcp")
SESSION_HEADER = "mcp-session-id"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO = {"name": "tokenplane", "version": "0.1.0"}
NOT_FOUND_SESSION = -32001


@dataclass
class Reply:
    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Caller:
    """Who sends the message and how: the principal, the endpoint's server (None: the
    aggregated /mcp), the headers the gateway reads."""

    principal: Principal
    scope: str | None
    session_id: str | None = None
    model: str | None = None  # x-tokenplane-model
    agent_session: str | None = None  # x-tokenplane-session
    request_id: str = ""


class McpService:
    def __init__(self, policy: McpPolicy, upstreams: dict[str, Upstream],
                 sessions: SessionStore, accounting: Accounting, metrics: McpMetrics,
                 guards: GuardPolicies | None = None,
                 audit: Callable[[McpAuditEntry, float], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 rates: RateStore | None = None) -> None:
        self.policy = policy
        self.upstreams = upstreams
        self.sessions = sessions
        self.accounting = accounting
        self.metrics = metrics
        self.guards = guards
        self.results = ResultGuard(policy, accounting, metrics, guards, self._labels)
        self.audit = audit
        self.clock = clock
        self.catalog = Catalog(upstreams, policy.config.list_ttl_s)
        self.rates = rates or LocalRates(policy.longest_window_s)
        self.inflight = InFlight()
        self.max_bytes = policy.config.max_message_bytes

    async def close(self) -> None:
        for up in self.upstreams.values():
            await up.close()
        await self.sessions.close()

    # --- the transport's three verbs ------------------------------------------------

    async def post(self, caller: Caller, body: bytes) -> Reply:
        rid: jsonrpc.Id = None
        try:
            if len(body) > self.max_bytes:
                raise RpcError(jsonrpc.MESSAGE_TOO_LARGE, f"Message of {len(body)} bytes is "
                               f"over the limit of {self.max_bytes} bytes "
                               "(mcp.max_message_bytes)", {"limit": self.max_bytes},
                               status=413)
            msg = jsonrpc.parse(body)
            if not isinstance(msg, Message):
                return Reply(202)  # a response to nothing we asked: accepted, dropped
            rid = msg.id
            self._scope_visible(caller)
            if msg.method == "initialize":
                return await self._initialize(caller, msg)
            if msg.method == "server/discover":  # the stateless era's probe: not spoken here
                raise RpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: server/discover "
                               f"(this gateway speaks MCP {SUPPORTED_VERSIONS[0]}: send "
                               "initialize)")
            session = await self._session(caller)
            if msg.notification:
                return Reply(202)
            value = await self._dispatch(caller, session, msg)
            return Reply(200, jsonrpc.result(rid, value))
        except RpcError as err:
            return Reply(err.status, err.body(rid))
        except (RedisError, OSError) as exc:
            return _store_down(exc, rid)

    async def delete(self, caller: Caller) -> Reply:
        try:
            await self._session(caller)
            assert caller.session_id is not None
            await self.sessions.delete(caller.session_id)
        except RpcError as err:
            return Reply(err.status, err.body(None))
        except (RedisError, OSError) as exc:
            return _store_down(exc, None)
        return Reply(200)

    # --- sessions ---------------------------------------------------------------------

    def _scope_visible(self, caller: Caller) -> None:
        scope = caller.scope
        if scope is None:
            return
        perms = self.policy.for_principal(caller.principal)
        if scope not in self.policy.servers or not perms.server_visible(scope):
            raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"Unknown MCP server: {scope}",
                           status=404)

    async def _initialize(self, caller: Caller, msg: Message) -> Reply:
        asked = msg.params.get("protocolVersion")
        version = asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]
        p = caller.principal
        model = caller.model
        if model is not None and not self.accounting.allowed(p.tenant, model):
            raise RpcError(jsonrpc.INVALID_PARAMS, f"x-tokenplane-model: {model!r} is not a "
                           "model this key may use", status=400)
        sid = new_session_id()
        await self.sessions.put(sid, McpSession(p.key_id, caller.scope, version, model))
        caps: dict[str, Any] = {"tools": {"listChanged": False},
                                "prompts": {"listChanged": False},
                                "resources": {"listChanged": False, "subscribe": False},
                                "logging": {}}
        result = {"protocolVersion": version, "capabilities": caps,
                  "serverInfo": SERVER_INFO,
                  "instructions": "Tools of this gateway are named server__tool."
                  if caller.scope is None else None}
        result = {k: v for k, v in result.items() if v is not None}
        return Reply(200, jsonrpc.result(msg.id, result), {SESSION_HEADER: sid})

    async def _session(self, caller: Caller) -> McpSession:
        sid = caller.session_id
        if not sid:
            raise RpcError(jsonrpc.INVALID_REQUEST, "Bad Request: no Mcp-Session-Id header "
                           "(send initialize first)", status=400)
        session = await self.sessions.get(sid)
        if session is None or session.key_id != caller.principal.key_id \
                or session.server != caller.scope:
            raise RpcError(NOT_FOUND_SESSION, "Session not found (expired or never opened "
                           "here): send initialize again", status=404)
        return session

    # --- methods ----------------------------------------------------------------------

    async def _dispatch(self, caller: Caller, session: McpSession, msg: Message) -> Any:
        method = msg.method
        if method == "ping" or method == "logging/setLevel":
            return {}
        if method == "tools/call":
            return await self._call_tool(caller, session, msg)
        if method in ("tools/list", "prompts/list", "resources/list",
                      "resources/templates/list"):
            return await self._list(caller, method)
        if method == "prompts/get":
            return await self._get(caller, msg, "prompts/get", "name")
        if method == "resources/read":
            return await self._get(caller, msg, "resources/read", "uri")
        raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")

    def _servers(self, caller: Caller, perms: Permissions) -> list[str]:
        if caller.scope is not None:
            return [caller.scope]
        return [s for s in self.policy.servers if perms.server_visible(s)]

    async def _list(self, caller: Caller, method: str) -> dict[str, Any]:
        perms = self.policy.for_principal(caller.principal)
        servers = self._servers(caller, perms)
        lists = await asyncio.gather(*(self.catalog.items(s, method) for s in servers),
                                     return_exceptions=True)
        items: list[dict[str, Any]] = []
        for server, found in zip(servers, lists, strict=True):
            if isinstance(found, BaseException):
                if not isinstance(found, (RpcError, UpstreamError)):
                    raise found
                if caller.scope is not None:
                    raise _relayed(found)
                log.warning("mcp: %s of %s failed: %s", method, server, found)
                continue
            items.extend(visible_items(self.policy, perms, server, method, found,
                                       caller.scope))
        return {LISTS[method][0]: items}

    def _target(self, caller: Caller, name: str, what: str) -> tuple[str, str]:
        if caller.scope is not None:
            return caller.scope, name
        parts = split_uri(name) if what == "resource" else split(name)
        if parts is None or parts[0] not in self.policy.servers:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"Unknown {what}: {name}")
        return parts

    async def _get(self, caller: Caller, msg: Message, method: str, param: str) -> Any:
        asked = jsonrpc.string_param(msg, param)
        what = "resource" if param == "uri" else "prompt"
        server, name = self._target(caller, asked, what)
        perms = self.policy.for_principal(caller.principal)
        if not perms.visible(qualify(server, name)):
            self._count(caller, server, name, method, "deny_hidden")
            raise RpcError(jsonrpc.INVALID_PARAMS, f"Unknown {what}: {asked}")
        params = {**msg.params, param: name}
        started = time.perf_counter()
        try:
            result = await self.upstreams[server].request(method, params)
        except (RpcError, UpstreamError) as err:
            self._count(caller, server, name, method, "upstream_error")
            raise _relayed(err) from None
        texts = read_texts(result)
        entry = self._entry(caller, method, server, name, "allow")
        entry.latency_ms = (time.perf_counter() - started) * 1000
        entry.content = {"params": msg.params.get("arguments"), "result": texts}
        self.results.screen(caller.principal, texts, entry)
        self._finish(caller, entry, server, name)
        return result

    async def _call_tool(self, caller: Caller, session: McpSession, msg: Message) -> Any:
        asked = jsonrpc.string_param(msg, "name")
        args = msg.params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise RpcError(jsonrpc.INVALID_PARAMS, "Invalid params: 'arguments' must be an "
                           "object")
        meta = msg.params.get("_meta")
        confirmed = isinstance(meta, dict) and meta.get(CONFIRM_META) is True
        try:
            server, tool = self._target(caller, asked, "tool")
        except RpcError:  # no such server: audited as a hidden name
            entry = self._entry(caller, "tools/call", None, asked, "deny_hidden")
            entry.reason, entry.verdict = f"Unknown tool: {asked}", "block"
            self._finish(caller, entry, None, asked)
            raise
        perms = self.policy.for_principal(caller.principal)
        denial = self.policy.check_call(perms, server, tool, args, confirmed)
        entry = self._entry(caller, "tools/call", server, tool, "allow")
        entry.content = {"arguments": args}
        entry.args_digest = result_digest(orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
                                          .decode())
        if denial is not None:
            entry.decision, entry.reason = denial.decision, denial.reason
            entry.verdict = "block"
            self._finish(caller, entry, server, tool)
            if denial.hidden:
                raise RpcError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {asked}")
            raise RpcError(jsonrpc.DENIED, denial.reason,
                           {"reason": denial.reason, "decision": denial.decision})
        settings = self.policy.tool(server, tool)
        qualified = qualify(server, tool)
        await self._limits(caller, entry, qualified, settings.rate, settings.rate_by,
                           settings.max_concurrent)
        started = time.perf_counter()
        try:
            params = dict(msg.params)
            params["name"] = tool
            if confirmed and isinstance(meta, dict):
                rest = {k: v for k, v in meta.items() if k != CONFIRM_META}
                if rest:
                    params["_meta"] = rest
                else:
                    params.pop("_meta", None)
            try:
                result = await self.upstreams[server].request("tools/call", params)
            except RpcError as err:
                entry.decision = "timeout" if err.code == jsonrpc.UPSTREAM_TIMEOUT \
                    else "upstream_error"
                entry.reason = err.message
                raise
            except UpstreamError as err:
                entry.decision, entry.reason = "upstream_error", str(err)
                raise _relayed(err) from None
            finally:
                entry.latency_ms = (time.perf_counter() - started) * 1000
                if settings.max_concurrent is not None:
                    self.inflight.leave(qualified)
            return self.results.result(caller.principal, session, entry, result,
                                       settings.max_result_tokens, settings.overflow)
        finally:
            self._finish(caller, entry, server, tool)

    async def _limits(self, caller: Caller, entry: McpAuditEntry, qualified: str,
                      rate: RateRule | None, rate_by: str, max_concurrent: int | None) -> None:
        p = caller.principal
        if rate is not None:
            who = p.key_id if rate_by == "key" else p.tenant if rate_by == "tenant" else "*"
            wait = await self.rates.take((qualified, who), rate)
            if wait is not None:
                reason = (f"{qualified}: at most {rate.calls} calls in {rate.per_s:g} s per "
                          f"{rate_by}; retry in {wait:.1f} s")
                entry.decision, entry.reason, entry.verdict = "rate_limited", reason, "block"
                self._finish(caller, entry, *qualified.split("__", 1))
                raise RpcError(jsonrpc.RATE_LIMITED, reason,
                               {"reason": reason, "decision": "rate_limited",
                                "retry_after_s": round(wait, 3)})
        if max_concurrent is not None and not self.inflight.enter(qualified, max_concurrent):
            reason = f"{qualified}: {max_concurrent} calls already in flight (max_concurrent)"
            entry.decision, entry.reason, entry.verdict = "concurrency_limited", reason, "block"
            self._finish(caller, entry, *qualified.split("__", 1))
            raise RpcError(jsonrpc.RATE_LIMITED, reason,
                           {"reason": reason, "decision": "concurrency_limited"})

    # --- records ----------------------------------------------------------------------

    def _entry(self, caller: Caller, method: str, server: str | None, name: str,
               decision: str) -> McpAuditEntry:
        p = caller.principal
        return McpAuditEntry(request_id=caller.request_id, tenant=p.tenant, key_id=p.key_id,
                             principal=p.department, app=p.app, method=method, server=server,
                             name=name, decision=decision, mcp_session=caller.session_id,
                             session={"id": caller.agent_session}
                             if caller.agent_session else None)

    def _labels(self, server: str | None, name: str | None, method: str) -> tuple[str, str]:
        """Metric labels that a client cannot multiply: a server of the config, a name its
        last list held (others are ``(unknown)`` and ``(unlisted)``)."""
        if server is None or server not in self.policy.servers:
            return "(unknown)", "(unlisted)"
        listing = _LIST_OF.get(method)
        if name is None or listing is None or not self.catalog.knows(server, listing, name):
            return server, "(unlisted)"
        return server, name

    def _count(self, caller: Caller, server: str | None, name: str | None, method: str,
               decision: str) -> None:
        s, n = self._labels(server, name, method)
        self.metrics.calls.labels(s, n, method, decision, caller.principal.tenant).inc()

    def _finish(self, caller: Caller, entry: McpAuditEntry, server: str | None,
                name: str | None) -> None:
        if entry.finished:
            return
        entry.finished = True
        tenant = caller.principal.tenant
        self._count(caller, server, name, entry.method, entry.decision)
        if entry.method == "tools/call" and entry.decision == "allow":
            s, n = self._labels(server, name, entry.method)
            self.metrics.duration.labels(s).observe(entry.latency_ms / 1000)
            self.metrics.result_bytes.labels(s, n, tenant).inc(entry.result_bytes)
            if entry.tokens.get("result"):
                self.metrics.result_tokens.labels(s, n, tenant).inc(entry.tokens["result"])
        entry.status = 200 if entry.decision == "allow" else 403
        if self.audit is not None:
            self.audit(entry, self.clock())


def _store_down(exc: BaseException, rid: jsonrpc.Id) -> Reply:
    """The session store failed (Redis down): the gateway's fault, said in JSON-RPC."""
    log.warning("mcp: the session store failed: %s", exc)
    err = RpcError(jsonrpc.INTERNAL_ERROR, "The gateway's session store is unavailable; "
                   "retry shortly", status=503)
    return Reply(503, err.body(rid), {"retry-after": "1"})


_LIST_OF = {"tools/call": "tools/list", "prompts/get": "prompts/list",
            "resources/read": "resources/list"}


def _relayed(err: RpcError | UpstreamError) -> RpcError:
    """An upstream's failure as the client's error (its JSON-RPC error as it is)."""
    if isinstance(err, RpcError):
        return err
    e = err.error
    code = e.get("code")
    return RpcError(code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
                    str(e.get("message") or "upstream error"),
                    e.get("data") if isinstance(e.get("data"), dict) else None)
