"""The pure part of discovery: EndpointSlice JSON and DNS answers to replicas, and the
plan from the replicas a backend has to those found."""

from __future__ import annotations

from typing import Any

from tokenplane.discovery.targets import (
    Target,
    address_targets,
    plan,
    slice_targets,
    srv_targets,
)


def _slice(endpoints: list[dict[str, Any]], ports: list[dict[str, Any]],
           address_type: str = "IPv4") -> dict[str, Any]:
    return {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": "s", "labels": {"kubernetes.io/service-name": "e"}},
            "addressType": address_type, "endpoints": endpoints, "ports": ports}


def test_ready_endpoints_on_the_named_port() -> None:
    obj = _slice([
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
        {"addresses": ["10.0.0.2"], "conditions": {}},  # unset: ready, as the API says
        {"addresses": ["10.0.0.3"], "conditions": {"ready": False}},
        {"addresses": ["10.0.0.4"], "conditions": {"ready": True, "terminating": True}},
        {"addresses": ["10.0.0.5"]},
    ], [{"name": "metrics", "port": 9090}, {"name": "http", "port": 8000}])
    assert slice_targets(obj, "b", "http") == {
        Target("b/10.0.0.1:8000", "http://10.0.0.1:8000"),
        Target("b/10.0.0.2:8000", "http://10.0.0.2:8000"),
        Target("b/10.0.0.5:8000", "http://10.0.0.5:8000")}
    # no port name: the first port; an unknown name: nothing
    assert {t.id for t in slice_targets(obj, "b", None)} == {
        "b/10.0.0.1:9090", "b/10.0.0.2:9090", "b/10.0.0.5:9090"}
    assert slice_targets(obj, "b", "grpc") == set()


def test_ipv6_is_bracketed_and_fqdn_slices_are_ignored() -> None:
    eps = [{"addresses": ["fd00::1"], "conditions": {"ready": True}}]
    (t,) = slice_targets(_slice(eps, [{"port": 80}], "IPv6"), "b", None, "https")
    assert t == Target("b/[fd00::1]:80", "https://[fd00::1]:80")
    fqdn = [{"addresses": ["engine.example"], "conditions": {"ready": True}}]
    assert slice_targets(_slice(fqdn, [{"port": 80}], "FQDN"), "b", None) == set()
    assert slice_targets({"endpoints": None, "ports": None}, "b", None) == set()


def test_srv_serves_the_lowest_priority_only() -> None:
    recs = [(10, 5, 8000, "10.0.0.9"), (0, 5, 8000, "10.0.0.1."), (0, 1, 8001, "10.0.0.2"),
            (0, 0, 0, ".")]  # "." : the service is decidedly not available there
    assert srv_targets(recs, "b") == {Target("b/10.0.0.1:8000", "http://10.0.0.1:8000"),
                                      Target("b/10.0.0.2:8001", "http://10.0.0.2:8001")}
    assert srv_targets([], "b") == set()
    assert address_targets(["10.0.0.1"], "b", 80) == {Target("b/10.0.0.1:80",
                                                             "http://10.0.0.1:80")}


def test_plan_adds_the_new_and_drains_the_gone() -> None:
    found = {Target("b/1:80", "http://1:80"), Target("b/3:80", "http://3:80")}
    p = plan({"b/1:80", "b/2:80"}, found)
    assert p.add == (Target("b/3:80", "http://3:80"),)
    assert p.drain == ("b/2:80",)
    assert plan(set(), []) == plan({"x"}, [Target("x", "u")])  # nothing to do
