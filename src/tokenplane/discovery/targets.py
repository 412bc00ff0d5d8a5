"""What a discovery source reports, as replicas to serve: pure functions from the
API's JSON or DNS answers to :class:`Target` sets, and the plan that moves a
backend's membership from what it has to what was found."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """One replica found: its endpoint id (``<backend id>/<host>:<port>``) and base URL."""

    id: str
    url: str


def target(backend_id: str, scheme: str, host: str, port: int) -> Target:
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL
    return Target(f"{backend_id}/{shown}:{port}", f"{scheme}://{shown}:{port}")


def slice_port(obj: Mapping[str, Any], port_name: str | None) -> int | None:
    """The port of an EndpointSlice (discovery.k8s.io/v1) named ``port_name`` (None:
    its only or first port); None when the slice has no such port."""
    ports = obj.get("ports") or []
    for p in ports:
        if not isinstance(p, Mapping) or not isinstance(p.get("port"), int):
            continue
        if port_name is None or p.get("name") == port_name:
            return int(p["port"])
    return None


def ready(endpoint: Mapping[str, Any]) -> bool:
    """An EndpointSlice endpoint takes traffic: ``conditions.ready`` true or unset
    (the API says to read unset as ready); a terminating one is never ready."""
    cond = endpoint.get("conditions") or {}
    if cond.get("terminating") is True:
        return False
    return cond.get("ready") is not False


def slice_targets(obj: Mapping[str, Any], backend_id: str, port_name: str | None,
                  scheme: str = "http") -> set[Target]:
    """The ready replicas of one EndpointSlice."""
    port = slice_port(obj, port_name)
    if port is None or obj.get("addressType", "IPv4") not in ("IPv4", "IPv6"):
        return set()
    out: set[Target] = set()
    for ep in obj.get("endpoints") or []:
        if isinstance(ep, Mapping) and ready(ep):
            for addr in ep.get("addresses") or []:
                if isinstance(addr, str) and addr:
                    out.add(target(backend_id, scheme, addr, port))
    return out


def union(sets: Iterable[set[Target]]) -> set[Target]:
    out: set[Target] = set()
    for s in sets:
        out |= s
    return out


def srv_targets(records: Iterable[tuple[int, int, int, str]], backend_id: str,
                scheme: str = "http") -> set[Target]:
    """SRV answers as (priority, weight, port, target host): the replicas of the
    best (lowest) priority; weights are the router's business, not discovery's."""
    recs = [r for r in records if r[3] not in ("", ".")]
    if not recs:
        return set()
    best = min(r[0] for r in recs)
    return {target(backend_id, scheme, host.rstrip("."), port)
            for prio, _w, port, host in recs if prio == best}


def address_targets(addresses: Iterable[str], backend_id: str, port: int,
                    scheme: str = "http") -> set[Target]:
    """A records (or any resolved addresses) on one port."""
    return {target(backend_id, scheme, a, port) for a in addresses}


@dataclass(frozen=True, slots=True)
class Plan:
    """Replicas to add (new ids) and ids to drain (no longer found)."""

    add: tuple[Target, ...]
    drain: tuple[str, ...]


def plan(members: Iterable[str], found: Iterable[Target]) -> Plan:
    """From ``members`` (the ids the backend has now) to ``found`` (an id names its
    host and port, so an id found is the same replica)."""
    have = set(members)
    want = {t.id: t for t in found}
    return Plan(tuple(sorted(t for i, t in want.items() if i not in have)),
                tuple(sorted(have - set(want))))
