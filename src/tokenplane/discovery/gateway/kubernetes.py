"""The ready endpoints of a Service's EndpointSlices (discovery.k8s.io/v1): a list,
then a watch from the list's resourceVersion (events as newline-delimited JSON);
the watch is resumed from the last resourceVersion seen when the server ends it,
and everything is listed again after an error (a 410 Gone included)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient, DiscoveryV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

from tokenplane.config.discovery_schema import KubernetesDiscovery
from tokenplane.discovery.targets import Target, slice_targets, union
from tokenplane.kube.client import api_client

log = logging.getLogger("tokenplane.discovery")

RETRY_S = 2.0  # after a failed list or watch, before listing again
WATCH_TIMEOUT_S = 300  # the server ends each watch after this; it resumes at once


class EndpointSliceWatch:
    """Calls ``on_change`` with every ready replica of the Service after the list
    and after each watch event that changed them."""

    def __init__(self, spec: KubernetesDiscovery, backend_id: str,
                 on_change: Callable[[set[Target]], None], retry_s: float = RETRY_S,
                 watch_timeout_s: int = WATCH_TIMEOUT_S) -> None:
        self.spec = spec
        self.backend_id = backend_id
        self.on_change = on_change
        self.retry_s = retry_s
        self.watch_timeout_s = watch_timeout_s
        self.slices: dict[str, set[Target]] = {}
        self.errors = 0

    @property
    def selector(self) -> str:
        return f"kubernetes.io/service-name={self.spec.service}"

    def _targets(self, obj: dict[str, Any]) -> set[Target]:
        return slice_targets(obj, self.backend_id, self.spec.port_name, self.spec.scheme)

    def _publish(self) -> None:
        self.on_change(union(self.slices.values()))

    async def run(self) -> None:
        while True:  # a kubeconfig that is not there yet, an unreadable token: again
            try:
                client = await api_client(self.spec.kubeconfig)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._failed(exc)
                continue
            await self._serve(client)

    async def _serve(self, client: ApiClient) -> None:
        try:
            api = DiscoveryV1Api(client)
            while True:
                try:
                    await self._list_and_watch(client, api)
                except asyncio.CancelledError:
                    raise
                except ApiException as exc:
                    if exc.status == 410:  # our resourceVersion is too old: list again now
                        log.info("EndpointSlices of %s/%s: watch expired; listing again",
                                 self.spec.namespace, self.spec.service)
                        continue
                    await self._failed(exc)
                except Exception as exc:  # the API down, a bad answer: list again
                    await self._failed(exc)
        finally:
            await client.close()

    async def _failed(self, exc: Exception) -> None:
        self.errors += 1
        log.warning("EndpointSlices of %s/%s: %s; listing again in %gs",
                    self.spec.namespace, self.spec.service, exc, self.retry_s)
        await asyncio.sleep(self.retry_s)

    async def _list_and_watch(self, client: ApiClient, api: DiscoveryV1Api) -> None:
        ns = self.spec.namespace
        listed = await api.list_namespaced_endpoint_slice(ns, label_selector=self.selector)
        self.slices = {}
        for item in listed.items or []:
            obj = client.sanitize_for_serialization(item)
            self.slices[obj["metadata"]["name"]] = self._targets(obj)
        self._publish()
        version = listed.metadata.resource_version if listed.metadata else None
        while True:  # each pass: one watch, until the server ends it
            async with Watch() as w:
                stream = w.stream(api.list_namespaced_endpoint_slice, ns,
                                  label_selector=self.selector, resource_version=version,
                                  allow_watch_bookmarks=True,
                                  timeout_seconds=self.watch_timeout_s)
                async for event in stream:
                    self._event(event["type"], event["raw_object"])
                version = w.resource_version or version

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "BOOKMARK":
            return
        name = obj.get("metadata", {}).get("name")
        if not isinstance(name, str):
            return
        before = union(self.slices.values())
        if kind == "DELETED":
            self.slices.pop(name, None)
        elif kind in ("ADDED", "MODIFIED"):
            self.slices[name] = self._targets(obj)
        if union(self.slices.values()) != before:
            self._publish()
