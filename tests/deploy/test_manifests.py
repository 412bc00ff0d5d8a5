"""deploy/kubernetes/ validated offline against the Kubernetes schemas
(kubernetes-validate) and KEDA's ScaledObject CRD (vendored), its files and
cross-references checked, and a planted error of each kind caught."""

from __future__ import annotations

import copy
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.deploy.schema_check import (
    MANIFESTS,
    documents,
    keda_crd,
    manifest_files,
    problems,
)
from tokenplane.autoscale.gateway.keda.servicer import trigger_of
from tokenplane.compose.config_file import validate_config

Doc = dict[str, Any]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any attempt to resolve or connect fails the test: the schemas must be local."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"schema validation tried the network: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def all_docs() -> list[tuple[str, Doc]]:
    return [(p.name, d) for p in manifest_files() for d in documents(p)]


def one(kind: str, name: str | None = None) -> Doc:
    found = [d for _, d in all_docs()
             if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def test_every_manifest_is_valid_offline(no_network: None) -> None:
    docs = all_docs()
    kinds = {d["kind"] for _, d in docs}
    assert {"Deployment", "Service", "ConfigMap", "ScaledObject", "ServiceAccount", "Role",
            "RoleBinding"} <= kinds
    errors = [f"{name}: {line}" for name, d in docs for line in problems(d)]
    assert errors == []


def test_the_kustomization_lists_every_manifest() -> None:
    (kustomization,) = documents(MANIFESTS / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == [p.name for p in manifest_files()]
    namespace = one("Namespace")["metadata"]["name"]
    assert kustomization["namespace"] == namespace
    images = {i["name"] for i in kustomization["images"]}
    used = {c["image"].rsplit(":", 1)[0] for c in containers()}
    assert used == images


def containers() -> list[Doc]:
    return [c for _, d in all_docs() if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"]]


def gateway_config() -> dict[str, Any]:
    text = one("ConfigMap", "tokenplane-config")["data"]["config.yaml"]
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def test_the_gateway_config_is_valid() -> None:
    """What ``tokenplane config check`` checks: the schema and the cross-references
    (the pool's alias exists, its actuator is keda, the KEDA listener is set)."""
    config = validate_config(gateway_config())
    assert config.autoscale.keda.listen is not None
    assert {a for a, p in config.autoscale.pools.items() if p.actuator == "keda"} == {
        m.alias for m in config.models}


def container_port(deployment: Doc, name: str) -> int:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    return int(ports[name])


def service_target(service: Doc, port: int) -> str:
    (match,) = [p for p in service["spec"]["ports"] if p["port"] == port]
    return str(match["targetPort"])


def selects(service_or_policy: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    return all(pod_labels.get(k) == v for k, v in service_or_policy.items())


def test_the_scaled_object_reaches_the_gateway_scaler_for_a_served_pool() -> None:
    so = one("ScaledObject")
    target = so["spec"]["scaleTargetRef"]
    engine = one(target["kind"], target["name"])
    assert target["apiVersion"] == engine["apiVersion"]
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] in ("external", "external-push")
    pool, _count = trigger_of(trigger["metadata"])
    config = gateway_config()
    assert pool in {m["alias"] for m in config["models"]}
    assert engine["metadata"]["labels"]["tokenplane.dev/pool"] == pool
    # scalerAddress: <service>.<namespace>.svc...:<port> of the gateway's scaler port.
    host, port = trigger["metadata"]["scalerAddress"].rsplit(":", 1)
    service_name, namespace = host.split(".")[:2]
    assert namespace == one("Namespace")["metadata"]["name"]
    service = one("Service", service_name)
    gateway = one("Deployment", "tokenplane-gateway")
    assert selects(service["spec"]["selector"], gateway["spec"]["template"]["metadata"]["labels"])
    target_port = service_target(service, int(port))
    listen_port = int(config["autoscale"]["keda"]["listen"].rsplit(":", 1)[1])
    assert container_port(gateway, target_port) == listen_port
    # The HPA adds no stabilisation of its own to the policy's.
    behavior = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 0


def test_engine_service_is_headless_and_selects_the_engine_pods() -> None:
    engine = one("Deployment", "engine-llama3-8b")
    service = one("Service", "engine-llama3-8b")
    assert service["spec"]["clusterIP"] == "None"
    assert selects(service["spec"]["selector"], engine["spec"]["template"]["metadata"]["labels"])
    (container,) = engine["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    (backend,) = gateway_config()["models"][0]["backends"]
    if "discovery" in backend:  # each pod found through the Service's EndpointSlices
        found = backend["discovery"]
        assert (found["kind"], found["service"], found["namespace"]) == (
            "kubernetes", service["metadata"]["name"], one("Namespace")["metadata"]["name"])
        assert found.get("port_name") in (None, service["spec"]["ports"][0]["name"])
    else:  # the Service's name
        assert backend["base_url"].startswith(f"http://{service['metadata']['name']}.")
        assert backend["base_url"].endswith(f":{service['spec']['ports'][0]['port']}")


def test_rbac_grants_scale_and_endpointslices_to_the_gateway() -> None:
    account = one("ServiceAccount")["metadata"]["name"]
    gateway = one("Deployment", "tokenplane-gateway")
    assert gateway["spec"]["template"]["spec"]["serviceAccountName"] == account
    binding = one("RoleBinding")
    role = one(binding["roleRef"]["kind"], binding["roleRef"]["name"])
    assert {(s["kind"], s["name"]) for s in binding["subjects"]} == {("ServiceAccount", account)}
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
    assert {("discovery.k8s.io", "endpointslices", "list"),
            ("discovery.k8s.io", "endpointslices", "watch"),
            ("apps", "deployments/scale", "get"),
            ("apps", "deployments/scale", "patch")} <= granted
    assert not any(v in ("*", "create", "delete") for _, _, v in granted)


def test_only_keda_reaches_the_scaler_port() -> None:
    policy = one("NetworkPolicy")
    gateway = one("Deployment", "tokenplane-gateway")
    labels = gateway["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["spec"]["podSelector"]["matchLabels"], labels)
    open_ports = {p["port"] for rule in policy["spec"]["ingress"] if "from" not in rule
                  for p in rule["ports"]}
    assert "keda-scaler" not in open_ports
    (keda_rule,) = [r for r in policy["spec"]["ingress"] if "from" in r]
    assert [p["port"] for p in keda_rule["ports"]] == ["keda-scaler"]


def test_the_vendored_crd_is_keda_scaled_objects() -> None:
    crd = keda_crd()
    assert crd["metadata"]["name"] == "scaledobjects.keda.sh"
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v1alpha1"]


def _set(path: str, value: object) -> Callable[[Doc], None]:
    def plant(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return plant


def _drop(path: str) -> Callable[[Doc], None]:
    def plant(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[int(last) if last.isdigit() else last]
    return plant


PLANTED = [
    # Kubernetes schemas: a wrong type, an unknown (misspelled) field, a missing
    # required field, an unknown kind.
    ("engine-deployment.yaml", _set("spec.template.spec.containers.0.ports.0.containerPort",
                                    "8000"), "is not of type 'integer'"),
    ("engine-deployment.yaml", _set("spec.replica", 1), "'replica' was unexpected"),
    ("gateway-deployment.yaml", _drop("spec.selector"), "'selector' is a required property"),
    ("gateway-service.yaml", _set("kind", "Servce"), "no schema"),
    ("rbac.yaml", _set("roleRef.kindd", "Role"), "'kindd' was unexpected"),
    # KEDA's CRD.
    ("scaledobject.yaml", _set("spec.minReplicaCount", "one"), "is not of type 'integer'"),
    ("scaledobject.yaml", _set("spec.triggers.0.metadata.pool", 3), "is not of type 'string'"),
    ("scaledobject.yaml", _drop("spec.triggers.0.type"), "'type' is a required property"),
    ("scaledobject.yaml", _set("spec.scaleTargetRef.kindd", "Deployment"),
     "'kindd' was unexpected"),
    ("scaledobject.yaml", _set("spec.pollingIntervall", 5), "'pollingIntervall' was unexpected"),
]


@pytest.mark.parametrize(("file", "plant", "words"), PLANTED,
                         ids=[f"{f}:{w}" for f, _, w in PLANTED])
def test_a_planted_error_is_caught(
    no_network: None, file: str, plant: Callable[[Doc], None], words: str
) -> None:
    docs = documents(MANIFESTS / file)
    target = copy.deepcopy(docs[-1] if file == "rbac.yaml" else docs[0])
    assert problems(target) == []
    plant(target)
    found = problems(target)
    assert found, f"{file}: the planted error passed"
    assert any(words in line for line in found), found
