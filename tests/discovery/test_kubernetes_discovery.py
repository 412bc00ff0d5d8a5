"""Backends discovered from a Service's EndpointSlices, against a local fake of the
Kubernetes API (real JSON, list + watch, bearer token from a kubeconfig): replicas
that become ready join after their first healthy scrape, replicas that terminate or
whose slice is deleted drain, and a steady stream of requests through the gateway
(official ``openai`` client) sees no failure meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.discovery.engines import EngineFarm, free_port_on
from tests.discovery.load import Load, in_pool, routable, served, wait_for
from tests.gateway.harness import GatewayThread
from tests.kube.fake_api import FakeKube, write_kubeconfig

ALIAS = "llama"
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]  # one "pod IP" each, one port for all


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    k = FakeKube().start()
    yield k
    k.stop()


@pytest.fixture
def farm() -> Iterator[EngineFarm]:
    f = EngineFarm(ALIAS, profile="llama3-8b-a100")
    yield f
    f.close()


def config(kubeconfig: Path, **discovery: Any) -> dict[str, Any]:
    return {
        "models": [{
            "alias": ALIAS, "tokenizer": "cl100k_base", "context_window": 4096,
            "backends": [{"id": "engine", "type": "vllm", "discovery": {
                "kind": "kubernetes", "service": "engine", "namespace": "serving",
                "port_name": "http", "kubeconfig": str(kubeconfig), **discovery}}],
        }],
        "routing": {"scrape_interval_s": 0.2},
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
    }


def test_replicas_join_and_drain_from_endpointslices_without_failed_requests(
    kube: FakeKube, farm: EngineFarm, tmp_path: Path,
) -> None:
    port = free_port_on(*HOSTS)
    ids = [f"engine/{h}:{port}" for h in HOSTS]
    farm.start(HOSTS[0], port)

    def slice_a(*eps: tuple[str, bool, bool]) -> None:
        kube.set_slice("engine-a", "engine", port, list(eps), namespace="serving")

    slice_a((HOSTS[0], True, False))
    # another Service's slice in the namespace: not ours
    kube.set_slice("other-x", "other", port, [("127.0.0.9", True, False)],
                   namespace="serving")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
    gw = GatewayThread(config(kubeconfig), tmp_path / "gw").start()
    try:
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[0]}, "the first replica")
        load = Load(gw, gw.create_key("default", app="discovery"), ALIAS).start()
        try:
            # two pods become ready: one in the same slice, one in a second slice; the
            # second is listed ready before its server listens: it joins only once
            # its first scrape passes
            farm.start(HOSTS[1], port)
            slice_a((HOSTS[0], True, False), (HOSTS[1], True, False))
            kube.set_slice("engine-b", "engine", port, [(HOSTS[2], True, False)],
                           namespace="serving")
            routing = gw.gateway.routing
            assert routing is not None
            wait_for(gw, lambda: routable(gw, ALIAS) == set(ids[:2])
                     and ids[2] in routing.live.joining, "the second replica, the third joining")
            farm.start(HOSTS[2], port)
            wait_for(gw, lambda: routable(gw, ALIAS) == set(ids), "the third replica")
            wait_for(gw, lambda: all(served(gw, ALIAS).get(i, 0) > 0 for i in ids),
                     "every replica to serve")

            # the first pod terminates: drained, removed, then its server stops
            slice_a((HOSTS[0], False, True), (HOSTS[1], True, False))
            wait_for(gw, lambda: ids[0] not in in_pool(gw, ALIAS), "the drain of pod 0")
            farm.stop(HOSTS[0], port)
            # the second slice is deleted (the Service lost that pod)
            kube.delete_slice("engine-b", namespace="serving")
            wait_for(gw, lambda: ids[2] not in in_pool(gw, ALIAS), "the drain of pod 2")
            farm.stop(HOSTS[2], port)
            before = load.ok
            wait_for(gw, lambda: load.ok >= before + 6, "requests on the last replica")
        finally:
            load.stop()
        assert load.failures == []
        assert load.ok >= 10
        assert in_pool(gw, ALIAS) == {ids[1]}
        assert ("GET", "/apis/discovery.k8s.io/v1/namespaces/serving/endpointslices") \
            in kube.requests
        assert kube.lists == 1 and kube.watches >= 1  # every change came by the watch
    finally:
        gw.stop()


def test_the_watch_resumes_and_relists_after_410_gone(
    kube: FakeKube, farm: EngineFarm, tmp_path: Path,
) -> None:
    port = free_port_on(*HOSTS[:2])
    ids = [f"engine/{h}:{port}" for h in HOSTS[:2]]
    farm.start(HOSTS[0], port)
    farm.start(HOSTS[1], port)
    kube.set_slice("engine-a", "engine", port, [(HOSTS[0], True, False)],
                   namespace="serving")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
    gw = GatewayThread(config(kubeconfig), tmp_path / "gw").start()
    try:
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[0]}, "the first replica")
        assert kube.lists == 1
        # the watch is cut and new ones wait; a pod becomes ready meanwhile and the
        # server forgets its history: the gateway's resume from its resourceVersion
        # is answered 410 Expired, so it lists again and finds the pod
        kube.hold_watches(True)
        kube.cut_watches()
        kube.set_slice("engine-a", "engine", port,
                       [(HOSTS[0], True, False), (HOSTS[1], True, False)],
                       namespace="serving")
        kube.expire_history()
        kube.hold_watches(False)
        wait_for(gw, lambda: routable(gw, ALIAS) == set(ids), "the second replica")
        assert kube.lists == 2
        # a watch the server ends normally is resumed, not listed again
        kube.cut_watches()
        kube.set_slice("engine-a", "engine", port, [(HOSTS[1], True, False)],
                       namespace="serving")
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[1]}, "the drain of pod 0")
        assert kube.lists == 2
    finally:
        gw.stop()


def test_a_bad_token_serves_nothing_and_says_why(
    kube: FakeKube, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, "wrong-token")
    gw = GatewayThread(config(kubeconfig), tmp_path / "gw").start()
    try:
        wait_for(gw, lambda: any("401" in r.getMessage() for r in caplog.records),
                 "the 401 to be logged")
        assert routable(gw, ALIAS) == set()
    finally:
        gw.stop()


def test_a_kubeconfig_that_appears_later_is_picked_up(
    kube: FakeKube, farm: EngineFarm, tmp_path: Path,
) -> None:
    port = free_port_on(HOSTS[0])
    farm.start(HOSTS[0], port)
    kube.set_slice("engine-a", "engine", port, [(HOSTS[0], True, False)],
                   namespace="serving")
    path = tmp_path / "kubeconfig"  # not there when the gateway starts (a secret mounted late)
    gw = GatewayThread(config(path), tmp_path / "gw").start()
    try:
        assert routable(gw, ALIAS) == set()
        write_kubeconfig(path, kube.url, kube.token)
        wait_for(gw, lambda: routable(gw, ALIAS) == {f"engine/{HOSTS[0]}:{port}"},
                 "the replica once the kubeconfig is there")
    finally:
        gw.stop()
