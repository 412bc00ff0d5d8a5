"""A local fake of the Kubernetes API server that speaks the real JSON for what
tokenplane uses: the ``/scale`` subresource (autoscaling/v1 ``Scale``) of Deployments,
StatefulSets and LeaderWorkerSets, reads of those objects, and EndpointSlices
(discovery.k8s.io/v1) listed and watched (``?watch=true``: events as
newline-delimited JSON, resumed from a ``resourceVersion``; a version older than
the server keeps answers an ``ERROR`` event with a 410 ``Expired`` status, as the
real server does). Requests need ``Authorization: Bearer <token>``; a kubeconfig
pointing at it is written by :func:`write_kubeconfig`.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml
from aiohttp import web

T = TypeVar("T")

SERVICE_LABEL = "kubernetes.io/service-name"
# the workload kinds with a scale subresource: (API group path, resource) -> kind
WORKLOADS = {
    ("apis/apps/v1", "deployments"): "Deployment",
    ("apis/apps/v1", "statefulsets"): "StatefulSet",
    ("apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets"): "LeaderWorkerSet",
}
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


@dataclass
class Workload:
    kind: str
    name: str
    namespace: str
    replicas: int
    ready: int = 0
    created: int | None = None  # status.replicas (pods that exist); None: = replicas
    resource_version: int = 1
    patches: list[tuple[str, Any]] = field(default_factory=list)  # (content type, body)

    def scale(self) -> dict[str, Any]:
        return {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "uid": f"uid-{self.kind}-{self.name}",
                         "resourceVersion": str(self.resource_version),
                         "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"replicas": self.replicas},
            "status": {"replicas": self.status_replicas(), "selector": f"app={self.name}"},
        }

    def status_replicas(self) -> int:
        return self.replicas if self.created is None else self.created

    def object(self, group: str) -> dict[str, Any]:
        labels = {"app": self.name}
        template = {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai"}]}}
        spec: dict[str, Any] = {"replicas": self.replicas, "selector": {"matchLabels": labels},
                                "template": template}
        if self.kind == "StatefulSet":
            spec["serviceName"] = self.name
        if self.kind == "LeaderWorkerSet":
            spec = {"replicas": self.replicas, "leaderWorkerTemplate": {
                "size": 2, "workerTemplate": template}}
        return {
            "kind": self.kind, "apiVersion": group.removeprefix("apis/"),
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "uid": f"uid-{self.kind}-{self.name}",
                         "resourceVersion": str(self.resource_version),
                         "generation": self.resource_version},
            "spec": spec,
            "status": {"replicas": self.status_replicas(), "readyReplicas": self.ready,
                       "updatedReplicas": self.status_replicas(),
                       "availableReplicas": self.ready},
        }


class FakeKube:
    """The fake API server on 127.0.0.1:<port>, in a thread of its own."""

    def __init__(self, token: str = "test-token") -> None:
        self.token = token
        self.version = 100  # the cluster's resourceVersion counter
        self.oldest = 100  # watches from before this answer 410 Expired
        self.slices: dict[tuple[str, str], dict[str, Any]] = {}  # (ns, name) -> slice
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (version, type, object)
        self.workloads: dict[tuple[str, str, str], Workload] = {}  # (resource, ns, name)
        self.requests: list[tuple[str, str]] = []  # (method, path) seen
        self.watches = 0  # watch requests served
        self.lists = 0  # EndpointSlice lists served
        self.on_scale: Callable[[Workload], None] | None = None
        self._changed: asyncio.Condition | None = None
        self._cuts = 0  # cut_watches() so far: open watches end
        self._open: asyncio.Event | None = None  # cleared: new watches wait
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def start(self) -> FakeKube:
        self._thread.start()

        async def up() -> None:
            self._changed = asyncio.Condition()
            self._open = asyncio.Event()
            self._open.set()
            app = web.Application(middlewares=[self._auth])
            app.router.add_route("*", "/{path:.*}", self._handle)
            self.runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = int(self.runner.addresses[0][1])

        self.call(up())
        return self

    def stop(self) -> None:
        if self.runner is not None:
            self.call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- what the test changes -------------------------------------------------------

    def add_workload(self, resource: str, name: str, replicas: int, ready: int = 0,
                     namespace: str = "default") -> Workload:
        group = next(g for g, r in WORKLOADS if r == resource)
        w = Workload(WORKLOADS[(group, resource)], name, namespace, replicas, ready)
        self.workloads[(resource, namespace, name)] = w
        return w

    def set_slice(self, name: str, service: str, port: int,
                  endpoints: list[tuple[str, bool, bool]], namespace: str = "default",
                  port_name: str = "http") -> None:
        """Create or replace an EndpointSlice: endpoints as (address, ready, terminating)."""
        self.call(self._set_slice(name, service, port, endpoints, namespace, port_name))

    def delete_slice(self, name: str, namespace: str = "default") -> None:
        self.call(self._delete_slice(name, namespace))

    def hold_watches(self, hold: bool) -> None:
        """``True``: watch requests wait (as while the API server restarts)."""
        self.call(self._hold(hold))

    async def _hold(self, hold: bool) -> None:
        assert self._open is not None
        if hold:
            self._open.clear()
        else:
            self._open.set()

    def cut_watches(self) -> None:
        """End every open watch (the client resumes from its resourceVersion)."""
        self.call(self._cut())

    async def _cut(self) -> None:
        self._cuts += 1
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    def expire_history(self) -> None:
        """Forget the events so far: a watch from an older resourceVersion gets 410."""
        self.call(self._expire())

    async def _expire(self) -> None:
        self.oldest = self.version
        self.events.clear()

    async def _set_slice(self, name: str, service: str, port: int,
                         endpoints: list[tuple[str, bool, bool]], namespace: str,
                         port_name: str) -> None:
        self.version += 1
        key = (namespace, name)
        kind = "MODIFIED" if key in self.slices else "ADDED"
        obj = {
            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {
                "name": name, "namespace": namespace, "generateName": f"{service}-",
                "uid": f"uid-slice-{name}", "resourceVersion": str(self.version),
                "labels": {SERVICE_LABEL: service,
                           "endpointslice.kubernetes.io/managed-by":
                               "endpointslice-controller.k8s.io"},
            },
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": [addr],
                "conditions": {"ready": ready, "serving": ready or term,
                               "terminating": term},
                "targetRef": {"kind": "Pod", "namespace": namespace,
                              "name": f"{service}-{i}", "uid": f"uid-pod-{addr}"},
            } for i, (addr, ready, term) in enumerate(endpoints)],
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        }
        self.slices[key] = obj
        await self._emit(kind, obj)

    async def _delete_slice(self, name: str, namespace: str) -> None:
        obj = self.slices.pop((namespace, name))
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        await self._emit("DELETED", obj)

    async def _emit(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append((self.version, kind, obj))
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    # -- the API -------------------------------------------------------------------

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        resp: web.StreamResponse = await handler(request)
        return resp

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        # /apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices
        if parts[:3] == ["apis", "discovery.k8s.io", "v1"] and len(parts) == 6 \
                and parts[3] == "namespaces" and parts[5] == "endpointslices":
            return await self._slices(request, parts[4])
        # /apis/{group}/{version}/namespaces/{ns}/{resource}/{name}[/scale]
        if len(parts) in (7, 8) and parts[0] == "apis" and parts[3] == "namespaces":
            group = "/".join(parts[:3])
            resource, ns, name = parts[5], parts[4], parts[6]
            if (group, resource) in WORKLOADS:
                w = self.workloads.get((resource, ns, name))
                if w is None:
                    return web.json_response(status(404, "NotFound", f'{resource} "{name}" '
                                                    "not found"), status=404)
                if len(parts) == 7 and request.method == "GET":
                    return web.json_response(w.object(group))
                if len(parts) == 8 and parts[7] == "scale":
                    return await self._scale(request, w)
        return web.json_response(status(404, "NotFound", "the server could not find the "
                                        "requested resource"), status=404)

    async def _scale(self, request: web.Request, w: Workload) -> web.Response:
        if request.method == "GET":
            return web.json_response(w.scale())
        if request.method not in ("PATCH", "PUT"):
            return web.json_response(status(405, "MethodNotAllowed", "method not allowed"),
                                     status=405)
        ctype = request.content_type
        if request.method == "PATCH" and ctype not in (MERGE_PATCH, STRATEGIC_PATCH):
            return web.json_response(status(415, "UnsupportedMediaType",
                                            f"the body of the request was in an unknown "
                                            f"format - accepted media types include: "
                                            f"{MERGE_PATCH}, {STRATEGIC_PATCH}"), status=415)
        if ctype == STRATEGIC_PATCH and w.kind == "LeaderWorkerSet":  # a custom resource
            return web.json_response(status(415, "UnsupportedMediaType",
                                            "strategic merge patch is not supported for "
                                            "custom resources"), status=415)
        body = orjson.loads(await request.read())
        w.patches.append((ctype, body))
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            return web.json_response(status(422, "Invalid", "spec.replicas: Invalid value"),
                                     status=422)
        w.replicas = replicas
        w.resource_version += 1
        if self.on_scale is not None:
            self.on_scale(w)
        return web.json_response(w.scale())

    def _selected(self, obj: dict[str, Any], selector: str | None) -> bool:
        if not selector:
            return True
        labels = obj["metadata"].get("labels", {})
        for term in selector.split(","):
            k, _, v = term.partition("=")
            if labels.get(k.strip()) != v.strip():
                return False
        return True

    async def _slices(self, request: web.Request, ns: str) -> web.StreamResponse:
        selector = request.query.get("labelSelector")
        # the server parses booleans as Go's strconv.ParseBool does
        if request.query.get("watch") not in ("1", "t", "T", "TRUE", "true", "True"):
            self.lists += 1
            items = [o for (n, _), o in sorted(self.slices.items())
                     if n == ns and self._selected(o, selector)]
            return web.json_response({
                "kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"resourceVersion": str(self.version)}, "items": items})
        self.watches += 1
        assert self._open is not None
        await self._open.wait()
        cuts = self._cuts
        since = int(request.query.get("resourceVersion") or self.version)
        timeout = float(request.query.get("timeoutSeconds") or 3600)
        resp = web.StreamResponse(headers={"content-type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if since < self.oldest:
            msg = f"too old resource version: {since} ({self.oldest})"
            await resp.write(orjson.dumps({"type": "ERROR",
                                           "object": status(410, "Expired", msg)}) + b"\n")
            return resp
        assert self._changed is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        sent = since
        while True:
            for version, kind, obj in list(self.events):
                if version > sent and obj["metadata"]["namespace"] == ns \
                        and self._selected(obj, selector):
                    await resp.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")
                sent = max(sent, version)
            left = deadline - loop.time()
            if left <= 0 or self._cuts != cuts:
                break
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    break
        return resp


def write_kubeconfig(path: Path, server: str, token: str, namespace: str = "default") -> Path:
    """A kubeconfig with one cluster, one user (a bearer token) and one context."""
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester",
                                                  "namespace": namespace}}],
    }
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path
