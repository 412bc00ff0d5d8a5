"""The gateway's client side of one upstream MCP server: streamable HTTP (answers in
JSON or in an SSE stream) or a local stdio process. One upstream session per server and
worker, opened on first use and reopened when the server forgets it (404)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from typing import Any, Protocol

import aiohttp
import orjson

from tokenplane.cancel import cancel_and_wait
from tokenplane.config.mcp_schema import McpServerConfig
from tokenplane.mcp.jsonrpc import UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, RpcError

log = logging.getLogger("tokenplane.mcp")
PROTOCOL_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "tokenplane-mcp-gateway", "version": "0.1.0"}


class UpstreamError(Exception):
    """The upstream answered with a JSON-RPC error: relayed to the client as it is."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message")))
        self.error = error


class Upstream(Protocol):
    name: str

    async def request(self, method: str, params: dict[str, Any] | None) -> Any: ...

    async def close(self) -> None: ...


def _timeout(name: str, timeout_s: float) -> RpcError:
    return RpcError(UPSTREAM_TIMEOUT, f"MCP server {name!r} did not answer within "
                    f"{timeout_s:g} s", {"server": name, "timeout_s": timeout_s})


def _down(name: str, why: str) -> RpcError:
    return RpcError(UPSTREAM_UNAVAILABLE, f"MCP server {name!r} is unavailable: {why}",
                    {"server": name})


def _initialize_params() -> dict[str, Any]:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": CLIENT_INFO}


class HttpClient:
    """The worker's one HTTP client of its upstreams, made on first use (in the loop)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=256,
                                               keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(total=None))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class HttpUpstream:
    """Streamable HTTP. ``headers_env`` values are read from the environment once."""

    def __init__(self, config: McpServerConfig, http: HttpClient) -> None:
        assert config.url is not None
        self.name = config.name
        self.url = config.url
        self.timeout_s = config.timeout_s
        self.http = http
        self.headers = {"accept": "application/json, text/event-stream",
                        "content-type": "application/json"}
        for header, env in config.headers_env.items():
            value = os.environ.get(env)
            if value is None:
                log.warning("mcp server %s: $%s is not set; %s not sent", self.name, env,
                            header)
            else:
                self.headers[header] = value
        self.session_id: str | None = None
        self._opening: asyncio.Lock = asyncio.Lock()
        self._ids = itertools.count(1)

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        try:
            async with asyncio.timeout(self.timeout_s):
                for attempt in range(2):
                    sid = await self._session()
                    status, answer = await self._post(method, params, sid)
                    if status == 404 and attempt == 0:  # the server forgot our session
                        if self.session_id == sid:
                            self.session_id = None
                        continue
                    return self._result(status, answer)
        except TimeoutError:
            raise _timeout(self.name, self.timeout_s) from None
        except aiohttp.ClientError as exc:
            raise _down(self.name, type(exc).__name__) from None
        raise _down(self.name, "it keeps losing the session")

    def _result(self, status: int, answer: Any) -> Any:
        if isinstance(answer, dict):
            if isinstance(answer.get("error"), dict):
                raise UpstreamError(answer["error"])
            if "result" in answer:
                return answer["result"]
        raise _down(self.name, f"HTTP {status} without a JSON-RPC answer")

    async def _session(self) -> str | None:
        if self.session_id is not None:
            return self.session_id
        async with self._opening:
            if self.session_id is None:
                status, answer = await self._post("initialize", _initialize_params(), None,
                                                  opening=True)
                self._result(status, answer)
                await self._notify("notifications/initialized")
        return self.session_id

    async def _notify(self, method: str) -> None:
        headers = self._headers(self.session_id)
        body = orjson.dumps({"jsonrpc": "2.0", "method": method})
        async with self.http.get().post(self.url, data=body, headers=headers) as resp:
            await resp.read()

    def _headers(self, sid: str | None) -> dict[str, str]:
        if sid is None:
            return self.headers
        return {**self.headers, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL_VERSION}

    async def _post(self, method: str, params: dict[str, Any] | None, sid: str | None,
                    opening: bool = False) -> tuple[int, Any]:
        rid = next(self._ids)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        async with self.http.get().post(self.url, data=orjson.dumps(msg),
                                  headers=self._headers(sid)) as resp:
            if opening:
                self.session_id = resp.headers.get("mcp-session-id")
            ctype = resp.headers.get("content-type", "")
            if ctype.startswith("text/event-stream"):
                return resp.status, await _sse_answer(resp, rid)
            raw = await resp.read()
            try:
                return resp.status, orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                return resp.status, None

    async def close(self) -> None:
        sid, self.session_id = self.session_id, None
        if sid is None:
            return
        try:
            async with asyncio.timeout(2):
                async with self.http.get().delete(self.url, headers=self._headers(sid)) as resp:
                    await resp.read()
        except (TimeoutError, aiohttp.ClientError):
            pass


async def _sse_answer(resp: aiohttp.ClientResponse, rid: int) -> Any:
    """The JSON-RPC answer to ``rid`` in an SSE stream (notifications before it are
    skipped)."""
    data: list[bytes] = []
    async for line in resp.content:
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
        elif not line and data:
            try:
                msg = orjson.loads(b"\n".join(data))
            except orjson.JSONDecodeError:
                msg = None
            data = []
            if isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg:
                return msg
    return None


class StdioUpstream:
    """A local server the gateway launches: newline-delimited JSON-RPC on its standard
    input and output; started on first use, restarted if it exits."""

    def __init__(self, config: McpServerConfig) -> None:
        assert config.command is not None
        self.name = config.name
        self.command = config.command
        self.timeout_s = config.timeout_s
        self.env = {**os.environ, **{h: os.environ.get(v, "")
                                     for h, v in config.headers_env.items()}}
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._opening = asyncio.Lock()

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._started()
                answer = await self._send(method, params)
        except TimeoutError:
            raise _timeout(self.name, self.timeout_s) from None
        except (OSError, ConnectionError) as exc:
            raise _down(self.name, type(exc).__name__) from None
        if isinstance(answer.get("error"), dict):
            raise UpstreamError(answer["error"])
        return answer.get("result")

    async def _started(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            return
        async with self._opening:
            if self._proc is not None and self._proc.returncode is None:
                return
            self._proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, env=self.env)
            self._reader = asyncio.create_task(self._read(self._proc))
            answer = await self._send("initialize", _initialize_params())
            if "result" not in answer:
                raise ConnectionError("initialize failed")
            self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _write(self, msg: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(orjson.dumps(msg) + b"\n")

    async def _send(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        rid = next(self._ids)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            self._write(msg)
            answer: dict[str, Any] = await fut
            return answer
        finally:
            self._waiting.pop(rid, None)

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            line = await proc.stdout.readline()
            if not line:
                break
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(msg, dict) and "method" not in msg:
                fut = self._waiting.get(msg.get("id"))  # type: ignore[arg-type]
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("the server exited"))

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(3):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._reader is not None:
            await cancel_and_wait([self._reader])
