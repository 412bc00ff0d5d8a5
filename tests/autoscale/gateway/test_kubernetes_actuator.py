"""The Kubernetes actuator against a local fake of the API server (real autoscaling/v1
Scale JSON, bearer token from a kubeconfig): it scales Deployments, StatefulSets and
LeaderWorkerSets through their /scale subresource with a merge patch, reports the
pods' phases, and, with discovery following the Service's EndpointSlices, the pods
it adds serve and the pods it removes drain while requests keep succeeding."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.discovery.engines import EngineFarm, free_port_on
from tests.discovery.load import Load, in_pool, routable, served, wait_for
from tests.gateway.harness import GatewayThread
from tests.kube.fake_api import MERGE_PATCH, FakeKube, write_kubeconfig
from tokenplane.autoscale.gateway.kubernetes import KubernetesActuator
from tokenplane.autoscale.model import ReplicaView
from tokenplane.config.kubernetes_scale_schema import KubernetesScaleConfig

ALIAS = "llama"
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    k = FakeKube().start()
    yield k
    k.stop()


def phases(views: tuple[ReplicaView, ...]) -> list[tuple[str, str, str]]:
    return [(v.id, v.phase, v.target) for v in views]


@pytest.mark.parametrize("kind,resource", [("Deployment", "deployments"),
                                           ("StatefulSet", "statefulsets"),
                                           ("LeaderWorkerSet", "leaderworkersets")])
async def test_scales_each_workload_kind_through_its_scale_subresource(
    kube: FakeKube, tmp_path: Path, kind: Any, resource: str,
) -> None:
    serving = kube.add_workload(resource, "vllm", replicas=2, ready=2, namespace="inference")
    warm = kube.add_workload(resource, "vllm-warm", replicas=0, namespace="inference")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
    act = KubernetesActuator({ALIAS: KubernetesScaleConfig(
        kind=kind, name="vllm", namespace="inference", warm_name="vllm-warm",
        kubeconfig=str(kubeconfig))}, clock=lambda: 100.0)
    await act.start()
    try:
        assert phases(await act.replicas(ALIAS)) == [
            ("vllm/0", "serving", "serving"), ("vllm/1", "serving", "serving")]
        await act.scale_to(ALIAS, 4, 1)
        assert (serving.replicas, warm.replicas) == (4, 1)
        # a merge patch of spec.replicas (a custom resource refuses a strategic one)
        assert serving.patches == [(MERGE_PATCH, {"spec": {"replicas": 4}})]
        assert warm.patches == [(MERGE_PATCH, {"spec": {"replicas": 1}})]
        group = "apps/v1" if resource != "leaderworkersets" else "leaderworkerset.x-k8s.io/v1"
        assert ("PATCH", f"/apis/{group}/namespaces/inference/{resource}/vllm/scale") \
            in kube.requests
        assert phases(await act.replicas(ALIAS)) == [
            ("vllm/0", "serving", "serving"), ("vllm/1", "serving", "serving"),
            ("vllm/2", "starting", "serving"), ("vllm/3", "starting", "serving"),
            ("vllm-warm/0", "starting", "warm")]
        warm.ready = 1
        serving.ready = 4
        views = await act.replicas(ALIAS)
        assert [v.phase for v in views] == ["serving"] * 4 + ["warm"]
        await act.scale_to(ALIAS, 4, 1)  # the same figures again: nothing is patched
        assert act.patches == 2
        # down to one: the pods that still exist beyond it are draining
        await act.scale_to(ALIAS, 1, 1)
        serving.created = 4
        assert [v.phase for v in await act.replicas(ALIAS)] == [
            "serving", "draining", "draining", "draining", "warm"]
    finally:
        await act.close()


async def test_a_missing_workload_or_a_bad_token_raise(kube: FakeKube, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, "wrong")
    act = KubernetesActuator({ALIAS: KubernetesScaleConfig(
        name="vllm", kubeconfig=str(kubeconfig))})
    await act.start()
    try:
        with pytest.raises(Exception, match="401"):
            await act.scale_to(ALIAS, 2, 0)
    finally:
        await act.close()
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
    act = KubernetesActuator({ALIAS: KubernetesScaleConfig(
        name="nothing", kubeconfig=str(kubeconfig))})
    await act.start()
    try:
        with pytest.raises(Exception, match="404"):
            await act.replicas(ALIAS)
    finally:
        await act.close()


def test_scaled_pods_join_through_discovery_and_leave_drained_under_load(
    kube: FakeKube, tmp_path: Path,
) -> None:
    farm = EngineFarm(ALIAS, profile="llama3-8b-a100")
    port = free_port_on(*HOSTS)
    ids = [f"engine/{h}:{port}" for h in HOSTS]
    deployment = kube.add_workload("deployments", "engine", replicas=1, ready=1,
                                   namespace="serving")
    kube.add_workload("deployments", "engine-warm", replicas=0, namespace="serving")

    def pods(ready: list[int], terminating: tuple[int, ...] = ()) -> None:
        """What the cluster's EndpointSlice controller publishes for the pods."""
        eps = [(HOSTS[i], True, False) for i in ready]
        eps += [(HOSTS[i], False, True) for i in terminating]
        kube.set_slice("engine-1", "engine", port, eps, namespace="serving")

    farm.start(HOSTS[0], port)
    pods([0])
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
    cfg = {
        "models": [{"alias": ALIAS, "tokenizer": "cl100k_base", "context_window": 4096,
                    "backends": [{"id": "engine", "type": "vllm", "discovery": {
                        "kind": "kubernetes", "service": "engine", "namespace": "serving",
                        "kubeconfig": str(kubeconfig)}}]}],
        "routing": {"scrape_interval_s": 0.2},
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
    }
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    act = KubernetesActuator({ALIAS: KubernetesScaleConfig(
        name="engine", namespace="serving", warm_name="engine-warm",
        kubeconfig=str(kubeconfig))})
    load: Load | None = None
    try:
        gw.call(act.start())
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[0]}, "the first pod")
        load = Load(gw, gw.create_key("default", app="k8s"), ALIAS).start()

        gw.call(act.scale_to(ALIAS, 3, 0))
        assert deployment.replicas == 3
        views = gw.call(act.replicas(ALIAS))
        assert [v.phase for v in views] == ["serving", "starting", "starting"]
        # the cluster starts the two pods; they become ready and enter the slice
        farm.start(HOSTS[1], port)
        farm.start(HOSTS[2], port)
        deployment.ready = 3
        pods([0, 1, 2])
        wait_for(gw, lambda: routable(gw, ALIAS) == set(ids), "three pods")
        wait_for(gw, lambda: all(served(gw, ALIAS).get(i, 0) > 0 for i in ids),
                 "every pod to serve")
        assert [v.phase for v in gw.call(act.replicas(ALIAS))] == ["serving"] * 3

        gw.call(act.scale_to(ALIAS, 1, 0))
        assert deployment.replicas == 1
        # the cluster terminates pods 1 and 2: they leave the ready endpoints first
        deployment.created, deployment.ready = 3, 1
        assert [v.phase for v in gw.call(act.replicas(ALIAS))] == [
            "serving", "draining", "draining"]
        pods([0], terminating=(1, 2))
        wait_for(gw, lambda: in_pool(gw, ALIAS) == {ids[0]}, "the drains")
        farm.stop(HOSTS[1], port)
        farm.stop(HOSTS[2], port)
        deployment.created = None
        before = load.ok
        wait_for(gw, lambda: load.ok >= before + 6, "requests on the last pod")
        load.stop()
        assert load.failures == []
        assert load.ok >= 10
    finally:
        if load is not None:
            load.stop()
        gw.call(act.close())
        gw.stop()
        farm.close()


def test_the_gateway_builds_it_from_autoscale_config(kube: FakeKube, tmp_path: Path) -> None:
    deployment = kube.add_workload("deployments", "engine", replicas=1, ready=1,
                                   namespace="serving")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
    cfg = {
        "models": [{"alias": ALIAS, "tokenizer": "cl100k_base",
                    "backends": [{"id": "engine", "type": "vllm", "discovery": {
                        "kind": "kubernetes", "service": "engine", "namespace": "serving",
                        "kubeconfig": str(kubeconfig)}}]}],
        "autoscale": {"interval": "1s", "history": 0, "pools": {ALIAS: {
            "min_replicas": 2, "max_replicas": 2, "warm_max": 0, "actuator": "kubernetes",
            "kubernetes": {"name": "engine", "namespace": "serving",
                           "kubeconfig": str(kubeconfig)}}}},
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
    }
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        controller = gw.gateway.autoscale
        assert controller is not None
        assert isinstance(controller.pools[ALIAS].actuator, KubernetesActuator)

        # the controller's own round: min_replicas is 2, so it asks the API for 2
        async def rounds() -> None:
            while deployment.replicas != 2:
                await controller.step()
                await asyncio.sleep(0)

        gw.call(asyncio.wait_for(rounds(), 30))
        assert deployment.patches[-1] == (MERGE_PATCH, {"spec": {"replicas": 2}})
    finally:
        gw.stop()


async def test_a_kubeconfig_not_there_yet_fails_rounds_not_the_start(
    kube: FakeKube, tmp_path: Path,
) -> None:
    kube.add_workload("deployments", "vllm", replicas=1, ready=1)
    path = tmp_path / "kubeconfig"
    act = KubernetesActuator({ALIAS: KubernetesScaleConfig(name="vllm",
                                                           kubeconfig=str(path))})
    await act.start()  # the gateway starts and serves meanwhile
    try:
        with pytest.raises(Exception):  # noqa: B017 - the client's own error for the file
            await act.replicas(ALIAS)
        write_kubeconfig(path, kube.url, kube.token)
        assert [v.phase for v in await act.replicas(ALIAS)] == ["serving"]
    finally:
        await act.close()
