"""Builds the discovery of every discovered backend (``backends[].discovery``): a
Kubernetes EndpointSlice watch or a DNS poll per backend, each feeding the
backend's replicas into its pool through the gateway's membership."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tokenplane.cancel import cancel_and_wait
from tokenplane.compose.endpoints import backend_id, http_endpoint
from tokenplane.config.discovery_schema import KubernetesDiscovery
from tokenplane.config.schema import BackendConfig, GatewayConfig, ModelConfig
from tokenplane.discovery.gateway.dns import DnsPoll
from tokenplane.discovery.gateway.kubernetes import EndpointSliceWatch
from tokenplane.discovery.gateway.sync import BackendSync
from tokenplane.discovery.targets import Target
from tokenplane.routing.gateway.membership import Membership
from tokenplane.upstream.pool import Endpoint

log = logging.getLogger("tokenplane.discovery")


@dataclass
class Discovery:
    """The sources of every discovered backend, run as tasks of the gateway's loop."""

    syncs: list[BackendSync] = field(default_factory=list)
    sources: list[EndpointSliceWatch | DnsPoll] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(_guarded(s.run), name=f"tokenplane-discovery-{i}")
                       for i, s in enumerate(self.sources)]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)


async def _guarded(run: Callable[[], Awaitable[None]]) -> None:
    try:
        await run()
    except asyncio.CancelledError:
        raise
    except Exception:  # a source that cannot start (a bad kubeconfig): say it, serve on
        log.exception("a discovery source stopped")


def _maker(model: ModelConfig, backend: BackendConfig) -> Callable[[Target], Endpoint]:
    return lambda t: http_endpoint(model, backend, t.id, t.url)


def build_discovery(config: GatewayConfig, membership: Membership) -> Discovery | None:
    d = Discovery()
    for m in config.models:
        for i, b in enumerate(m.backends):
            spec = b.discovery
            if spec is None:
                continue
            bid = backend_id(m, b, i)
            sync = BackendSync(m.alias, bid, membership, _maker(m, b))
            d.syncs.append(sync)
            if isinstance(spec, KubernetesDiscovery):
                d.sources.append(EndpointSliceWatch(spec, bid, sync.apply))
            else:
                d.sources.append(DnsPoll(spec, bid, sync.apply))
    return d if d.sources else None
