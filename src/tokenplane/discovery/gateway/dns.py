"""A name resolved every ``interval_s``: A records on the configured port, or SRV
records (their targets and ports). Without ``nameserver`` an A name is resolved as
the system does (``/etc/hosts`` included, so ``localhost`` works); SRV records and
any name asked of a ``nameserver`` go through dnspython's asynchronous resolver.

A name that does not exist or has no such records means no replicas (they are
drained); a resolution that fails (timeout, no server answering) changes nothing."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any

import dns.asyncresolver
import dns.exception
import dns.resolver

from tokenplane.config.discovery_schema import DnsDiscovery
from tokenplane.discovery.targets import Target, address_targets, srv_targets

log = logging.getLogger("tokenplane.discovery")

LIFETIME_S = 5.0  # one resolution's time limit


class DnsFailure(Exception):
    """The name could not be resolved this time (the replicas found stay)."""


class DnsPoll:
    def __init__(self, spec: DnsDiscovery, backend_id: str,
                 on_change: Callable[[set[Target]], None]) -> None:
        self.spec = spec
        self.backend_id = backend_id
        self.on_change = on_change
        self.failures = 0

    async def run(self) -> None:
        while True:
            try:
                found = await self.resolve()
            except DnsFailure as exc:
                self.failures += 1
                log.warning("DNS discovery of %s failed: %s", self.spec.name, exc)
            else:
                self.on_change(found)
            await asyncio.sleep(self.spec.interval_s)

    def _resolver(self) -> dns.asyncresolver.Resolver:
        ns = self.spec.nameserver
        if ns is None:
            return dns.asyncresolver.Resolver()
        r = dns.asyncresolver.Resolver(configure=False)
        host, _, port = ns.rpartition(":") if ns.count(":") == 1 else (ns, "", "")
        r.nameservers = [host]
        if port:
            r.port = int(port)
        return r

    async def resolve(self) -> set[Target]:
        s = self.spec
        if s.record == "A" and s.nameserver is None:
            return await self._system_a()
        resolver = self._resolver()
        if s.record == "SRV":
            # a target of "." says the service is not available there
            recs = [r for r in await self._ask(resolver, s.name, "SRV") if r[3] != "."]
            hosts = await self._addresses(resolver, {str(r[3]) for r in recs})
            return srv_targets([(p, w, port, a) for p, w, port, host in recs
                                for a in hosts.get(str(host), ())], self.backend_id, s.scheme)
        assert s.port is not None
        addrs = await self._ask(resolver, s.name, "A")
        return address_targets((str(a) for a in addrs), self.backend_id, s.port, s.scheme)

    @staticmethod
    async def _ask(resolver: dns.asyncresolver.Resolver, name: str, rdtype: str) -> list[Any]:
        """SRV answers as (priority, weight, port, target), A answers as addresses;
        [] when the name or the records do not exist."""
        try:
            answer = await resolver.resolve(name, rdtype, lifetime=LIFETIME_S)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.DNSException as exc:
            raise DnsFailure(str(exc) or type(exc).__name__) from exc
        if rdtype == "SRV":
            return [(r.priority, r.weight, r.port, r.target.to_text()) for r in answer]
        return [r.address for r in answer]

    async def _addresses(self, resolver: dns.asyncresolver.Resolver,
                         hosts: set[str]) -> dict[str, list[str]]:
        """The IPv4 addresses of SRV targets, asked of the same resolver (a target
        named by an address is its own)."""
        out: dict[str, list[str]] = {}
        for host in sorted(hosts):
            bare = host.rstrip(".")
            if _is_ipv4(bare):
                out[host] = [bare]
            else:
                out[host] = [str(a) for a in await self._ask(resolver, host, "A")]
        return out

    async def _system_a(self) -> set[Target]:
        s = self.spec
        assert s.port is not None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                s.name, s.port, family=socket.AF_INET, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno == socket.EAI_NONAME:
                return set()
            raise DnsFailure(str(exc)) from exc
        return address_targets({str(i[4][0]) for i in infos}, self.backend_id, s.port,
                               s.scheme)


def _is_ipv4(host: str) -> bool:
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return host.count(".") == 3
