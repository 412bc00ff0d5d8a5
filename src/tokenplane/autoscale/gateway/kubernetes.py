"""The Kubernetes actuator: a pool's replicas are the pods of a Deployment,
StatefulSet or LeaderWorkerSet, scaled through its ``/scale`` subresource
(autoscaling/v1 ``Scale``) with kubernetes-asyncio, in-cluster or from a kubeconfig.

``scale_to(pool, serving, warm)`` merge-patches ``spec.replicas`` of the serving
workload to ``serving`` and, when the pool has a warm workload (``warm_name``), of
that one to ``warm`` (a merge patch, which built-in and custom resources both
accept). Nothing is patched when the spec already says so (it is called every
interval). ``replicas(pool)`` reads each workload's scale (desired and existing
replicas) and its ``status.readyReplicas``: ready pods are ``serving`` (or ``warm``),
the rest of the desired ones ``starting``, existing pods beyond the desired count
``draining``. The gateway's own discovery (EndpointSlices of the Service in front
of the serving workload) adds the new pods to routing after their first healthy
scrape and drains the leaving ones.

RBAC (docs/DISCOVERY.md): ``get`` on the workloads, ``get`` and ``patch`` on their
``/scale`` subresource.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes_asyncio.client import ApiClient, AppsV1Api, CustomObjectsApi

from tokenplane.autoscale.model import ReplicaPhase, ReplicaView
from tokenplane.config.kubernetes_scale_schema import KubernetesScaleConfig, WorkloadKind
from tokenplane.kube.client import api_client

log = logging.getLogger("tokenplane.autoscale")

MERGE_PATCH = "application/merge-patch+json"
LWS = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")


@dataclass(frozen=True, slots=True)
class WorkloadScale:
    """One workload's replicas: desired (``spec``), existing (``status``), ready."""

    spec: int
    status: int
    ready: int


class ScaleClient:
    """Reads and patches the scale of the three workload kinds."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.apps = AppsV1Api(client)
        self.custom = CustomObjectsApi(client)

    def _dict(self, obj: Any) -> dict[str, Any]:
        out = obj if isinstance(obj, dict) else self.client.sanitize_for_serialization(obj)
        assert isinstance(out, dict)
        return out

    async def read(self, kind: WorkloadKind, ns: str, name: str) -> WorkloadScale:
        if kind == "Deployment":
            scale = await self.apps.read_namespaced_deployment_scale(name, ns)
            obj: Any = await self.apps.read_namespaced_deployment(name, ns)
        elif kind == "StatefulSet":
            scale = await self.apps.read_namespaced_stateful_set_scale(name, ns)
            obj = await self.apps.read_namespaced_stateful_set(name, ns)
        else:
            scale = await self.custom.get_namespaced_custom_object_scale(*LWS[:2], ns,
                                                                          LWS[2], name)
            obj = await self.custom.get_namespaced_custom_object(*LWS[:2], ns, LWS[2], name)
        s, o = self._dict(scale), self._dict(obj)
        return WorkloadScale(spec=int((s.get("spec") or {}).get("replicas") or 0),
                             status=int((s.get("status") or {}).get("replicas") or 0),
                             ready=int((o.get("status") or {}).get("readyReplicas") or 0))

    async def scale(self, kind: WorkloadKind, ns: str, name: str, replicas: int) -> None:
        body = {"spec": {"replicas": replicas}}
        # the client would send a dict as a strategic merge patch, which custom
        # resources refuse (415): a merge patch, which every kind takes; its stubs
        # omit the generated methods' _content_type keyword
        ct: Any = {"_content_type": MERGE_PATCH}
        if kind == "Deployment":
            await self.apps.patch_namespaced_deployment_scale(name, ns, body, **ct)
        elif kind == "StatefulSet":
            await self.apps.patch_namespaced_stateful_set_scale(name, ns, body, **ct)
        else:
            await self.custom.patch_namespaced_custom_object_scale(
                *LWS[:2], ns, LWS[2], name, body, **ct)


def views(name: str, w: WorkloadScale, ready_phase: Literal["serving", "warm"],
          since: Callable[[str, ReplicaPhase], float]) -> list[ReplicaView]:
    """The replicas of one workload as the controller sees them. Pods are not named
    here (the count is what is scaled): ``<workload>/<n>``, ready ones first."""
    out: list[ReplicaView] = []
    ready = min(w.ready, w.spec)
    for i in range(max(w.spec, w.status, w.ready)):
        phase: ReplicaPhase = (ready_phase if i < ready else
                               "starting" if i < w.spec else "draining")
        rid = f"{name}/{i}"
        out.append(ReplicaView(rid, phase, since(rid, phase), target=ready_phase))
    return out


class KubernetesActuator:
    kind = "kubernetes"

    def __init__(self, targets: Mapping[str, KubernetesScaleConfig],
                 clock: Callable[[], float] = time.time,
                 connect: Callable[[str | None], Awaitable[ApiClient]] = api_client) -> None:
        self.targets = dict(targets)
        self.clock = clock
        self.connect = connect
        self._clients: dict[str | None, ScaleClient] = {}  # by kubeconfig
        self._since: dict[str, tuple[ReplicaPhase, float]] = {}
        self.patches = 0

    async def start(self) -> None:
        """Connects now when it can; a client that cannot be made yet (a kubeconfig not
        mounted yet) is made on the first round that needs it (that round fails and
        says why until then), so the gateway serves meanwhile."""
        for cfg in self.targets.values():
            try:
                await self._client(cfg)
            except Exception as exc:
                log.warning("Kubernetes actuator: no API client yet for %s: %s", cfg.name, exc)

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for c in clients.values():
            await c.client.close()

    async def _client(self, cfg: KubernetesScaleConfig) -> ScaleClient:
        c = self._clients.get(cfg.kubeconfig)
        if c is None:
            c = self._clients[cfg.kubeconfig] = ScaleClient(await self.connect(cfg.kubeconfig))
        return c

    def _phase_since(self, rid: str, phase: ReplicaPhase) -> float:
        seen = self._since.get(rid)
        if seen is None or seen[0] != phase:
            seen = (phase, self.clock())
            self._since[rid] = seen
        return seen[1]

    async def replicas(self, pool: str) -> tuple[ReplicaView, ...]:
        cfg = self.targets[pool]
        c = await self._client(cfg)
        out = views(cfg.name, await c.read(cfg.kind, cfg.namespace, cfg.name), "serving",
                    self._phase_since)
        if cfg.warm_name is not None:
            warm = await c.read(cfg.kind, cfg.namespace, cfg.warm_name)
            out += views(cfg.warm_name, warm, "warm", self._phase_since)
        return tuple(out)

    async def scale_to(self, pool: str, serving: int, warm: int) -> None:
        cfg = self.targets[pool]
        c = await self._client(cfg)
        wanted = [(cfg.name, serving)]
        if cfg.warm_name is not None:
            wanted.append((cfg.warm_name, warm))
        for name, n in wanted:
            now = await c.read(cfg.kind, cfg.namespace, name)
            if now.spec != n:
                await c.scale(cfg.kind, cfg.namespace, name, n)
                self.patches += 1
                log.info("%s %s/%s scaled %d -> %d (pool %s)", cfg.kind, cfg.namespace,
                         name, now.spec, n, pool)
