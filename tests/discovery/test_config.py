"""``backends[].discovery`` in the config: each mistake named by its path, as
``tokenplane config check`` prints it."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplane.compose.config_file import ConfigError, validate_config
from tokenplane.config.discovery_schema import DnsDiscovery, KubernetesDiscovery


def _config(**backend: Any) -> dict[str, Any]:
    return {"models": [{"alias": "chat", "backends": [{"type": "vllm", **backend}]}]}


def _errors(cfg: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    return info.value.errors


def test_defaults() -> None:
    cfg = validate_config(_config(discovery={"kind": "kubernetes", "service": "vllm"}))
    d = cfg.models[0].backends[0].discovery
    assert isinstance(d, KubernetesDiscovery)
    assert (d.namespace, d.port_name, d.kubeconfig, d.scheme) == ("default", None, None,
                                                                  "http")
    cfg = validate_config(_config(discovery={"kind": "dns", "name": "e.internal",
                                             "port": 8000}))
    d = cfg.models[0].backends[0].discovery
    assert isinstance(d, DnsDiscovery)
    assert (d.record, d.interval_s, d.nameserver) == ("A", 10.0, None)


K8S = {"kind": "kubernetes", "service": "vllm"}


@pytest.mark.parametrize("backend,expected", [
    ({}, "models[0].backends[0]: base_url (or discovery) is required"),
    ({"base_url": "http://a:1", "discovery": K8S},
     "models[0].backends[0]: a backend has either base_url or discovery"),
    ({"replicas": 2, "discovery": K8S}, "models[0].backends[0]: replicas is for simulated"),
    ({"discovery": {"kind": "consul", "service": "x"}},
     "models[0].backends[0].discovery: Input tag 'consul'"),
    ({"discovery": {"kind": "kubernetes"}},
     "models[0].backends[0].discovery.kubernetes.service: required field missing"),
    ({"discovery": {"kind": "kubernetes", "service": "x", "namespaces": "y"}},
     "models[0].backends[0].discovery.kubernetes.namespaces: unknown field"),
    ({"discovery": {"kind": "dns", "name": "e"}},
     "models[0].backends[0].discovery.dns: an A-record discovery needs the replicas' port"),
    ({"discovery": {"kind": "dns", "name": "e", "record": "SRV", "port": 80}},
     "models[0].backends[0].discovery.dns: SRV records carry their own ports"),
    ({"discovery": {"kind": "dns", "name": "e", "record": "AAAA", "port": 80}},
     "models[0].backends[0].discovery.dns.record: Input should be"),
    ({"discovery": {"kind": "dns", "name": "e", "port": 80, "interval_s": 0}},
     "models[0].backends[0].discovery.dns.interval_s: Input should be greater than 0"),
    ({"discovery": {"kind": "dns", "name": "e", "port": 80, "nameserver": "ns:fifty"}},
     "models[0].backends[0].discovery.dns.nameserver: "),
])
def test_mistakes_are_named_by_path(backend: dict[str, Any], expected: str) -> None:
    errors = _errors(_config(**backend))
    assert any(e.startswith(expected) for e in errors), errors
