"""The gateway's client side of one upstream MCP server: streamable HTTP (answers in
JSON or in an SSE stream) or a local stdio process. One upstream session per server and
worker, opened on first use and reopened when the server forgets it (404)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from typing import Any, Protocol

import orjson

from tokenplane.cancel import cancel_and_wait
from tokenplane.config.mcp_schema import McpServerConfig
from tokenplane.mcp.jsonrpc import UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, RpcError
from tokenplane.upstream.http1_client import H1Connection, H1Error, H1Pool

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


class HttpUpstream:
    """Streamable HTTP over the gateway's own HTTP/1.1 client (keep-alive connections,
    ``upstream/http1_client.py``). ``headers_env`` values are read from the environment
    once."""

    def __init__(self, config: McpServerConfig) -> None:
        assert config.url is not None
        self.name = config.name
        self.timeout_s = config.timeout_s
        self.pool = H1Pool(config.url)
        self.headers = {"accept": "application/json, text/event-stream",
                        "content-type": "application/json"}
        for header, env in config.headers_env.items():
            value = os.environ.get(env)
            if value is None:
                log.warning("mcp server %s: $%s is not set; %s not sent", self.name, env,
                            header)
            else:
                self.headers[header.lower()] = value
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
        except H1Error as exc:
            raise _down(self.name, str(exc) or type(exc).__name__) from None
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
                body = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
                await self._exchange("POST", self._headers(self.session_id), body)
        return self.session_id

    def _headers(self, sid: str | None) -> dict[str, str]:
        if sid is None:
            return self.headers
        return {**self.headers, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL_VERSION}

    async def _exchange(self, verb: str, headers: dict[str, str], body: bytes,
                        rid: int | None = None) -> tuple[int, dict[str, str], Any]:
        """One request; the answer's status, headers and JSON-RPC answer (the one to
        ``rid`` in an SSE stream). The connection is reused only after a whole answer."""
        conn = await self.pool.request(verb, "", headers, body)
        done = False
        try:
            status, got = await conn.head()
            answer: Any
            if got.get("content-type", "").startswith("text/event-stream"):
                answer = await _sse_answer(conn, rid)
            else:
                raw = await conn.read_all()
                try:
                    answer = orjson.loads(raw) if raw else None
                except orjson.JSONDecodeError:
                    answer = None
            done = True
            return status, got, answer
        finally:
            if done:
                self.pool.release(conn)
            else:
                conn.close()

    async def _post(self, method: str, params: dict[str, Any] | None, sid: str | None,
                    opening: bool = False) -> tuple[int, Any]:
        rid = next(self._ids)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        status, got, answer = await self._exchange("POST", self._headers(sid),
                                                   orjson.dumps(msg), rid)
        if opening:
            self.session_id = got.get("mcp-session-id")
        return status, answer

    async def close(self) -> None:
        sid, self.session_id = self.session_id, None
        try:
            if sid is not None:
                async with asyncio.timeout(2):
                    await self._exchange("DELETE", self._headers(sid), b"")
        except (TimeoutError, H1Error):
            pass
        finally:
            self.pool.close()


async def _sse_answer(conn: H1Connection, rid: int | None) -> Any:
    """The JSON-RPC answer to ``rid`` in an SSE stream (notifications before it are
    skipped; the rest of the stream read, so that the connection can be reused); None
    when the stream ends without it."""
    buf = b""
    found: Any = None
    while chunk := await conn.read_some():
        if found is not None:
            continue
        buf += chunk
        while found is None:
            end = _event_end(buf)
            if end is None:
                break
            event, buf = buf[:end[0]], buf[end[1]:]
            data = b"\n".join(line[5:].lstrip(b" ") for line in event.splitlines()
                              if line.startswith(b"data:"))
            try:
                msg = orjson.loads(data) if data else None
            except orjson.JSONDecodeError:
                msg = None
            if isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg:
                found = msg
    return found


def _event_end(buf: bytes) -> tuple[int, int] | None:
    """Where the first event of ``buf`` ends and the next begins (a blank line)."""
    ends = [(i, i + len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (i := buf.find(sep)) >= 0]
    return min(ends) if ends else None


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
