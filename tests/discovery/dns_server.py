"""A tiny authoritative DNS server on 127.0.0.1 (UDP), with dnspython's wire format:
A and SRV records a test sets and changes; any other name is NXDOMAIN."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        assert self.transport is not None
        self.transport.sendto(self.server.answer(data), addr)


class DnsServer:
    def __init__(self) -> None:
        self.records: dict[tuple[str, str], list[str]] = {}  # (name., type) -> rdata texts
        self.queries: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._transport: Any = None
        self.port = 0

    def start(self) -> DnsServer:
        self._thread.start()

        async def up() -> None:
            transport, _ = await self.loop.create_datagram_endpoint(
                lambda: _Protocol(self), local_addr=("127.0.0.1", 0))
            self._transport = transport
            self.port = int(transport.get_extra_info("sockname")[1])

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(10)
        return self

    def stop(self) -> None:
        async def down() -> None:
            if self._transport is not None:
                self._transport.close()
                await asyncio.sleep(0)  # the socket closes on the next turn of the loop

        asyncio.run_coroutine_threadsafe(down(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, name: str, rdtype: str, rdatas: list[str]) -> None:
        """``rdatas`` in zone-file form: ``"127.0.0.2"`` (A), ``"0 5 8000 pod-a.test."`` (SRV)."""
        with self._lock:
            self.records[(name.rstrip(".") + ".", rdtype)] = list(rdatas)

    def answer(self, data: bytes) -> bytes:
        query = dns.message.from_wire(data)
        resp = dns.message.make_response(query)
        resp.flags |= dns.flags.AA
        for q in query.question:
            name, rdtype = q.name.to_text(), dns.rdatatype.to_text(q.rdtype)
            with self._lock:
                self.queries.append((name, rdtype))
                known = {n for n, _ in self.records}
                rdatas = self.records.get((name, rdtype))
            if name not in known:
                resp.set_rcode(dns.rcode.NXDOMAIN)
            elif rdatas:
                resp.answer.append(dns.rrset.from_text_list(name, 1, "IN", rdtype, rdatas))
        return resp.to_wire()
