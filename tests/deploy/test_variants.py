"""deploy/kubernetes/variants/: each variant rendered by ``kubectl kustomize`` and
its output validated offline (Kubernetes schemas, KEDA's CRD, the ServiceMonitor
subset), its gateway config accepted as ``serve`` would, and its wiring checked:
ports, probes, Secret keys, selectors, the ConfigMap the pods mount."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from typing import Any

import pytest
import yaml

from tests.deploy.schema_check import ROOT, problems
from tokenplane.compose.config_file import validate_config
from tokenplane.compose.preflight import preflight

Doc = dict[str, Any]
VARIANTS = ROOT / "deploy/kubernetes/variants"
NAMES = ("single-box", "ha", "keda")
SECRET = "tokenplane-secrets"
SECRET_KEYS = {"audit-key", "console-secret", "database-url", "redis-url"}  # README


@cache
def rendered(variant: str) -> tuple[Doc, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is required in CI (kubectl kustomize renders the variants)")
        pytest.skip("kubectl not installed")
    out = subprocess.run([kubectl, "kustomize", str(VARIANTS / variant)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d is not None)


def kinds(variant: str) -> dict[str, list[Doc]]:
    out: dict[str, list[Doc]] = {}
    for d in rendered(variant):
        out.setdefault(d["kind"], []).append(d)
    return out


def only(variant: str, kind: str) -> Doc:
    found = kinds(variant).get(kind, [])
    assert len(found) == 1, f"{variant}: expected one {kind}, found {len(found)}"
    return found[0]


def gateway(variant: str) -> Doc:
    (c,) = only(variant, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_every_variant_is_listed_in_the_readme() -> None:
    text = (VARIANTS / "README.md").read_text()
    assert sorted(p.name for p in VARIANTS.iterdir()
                  if (p / "kustomization.yaml").exists() and p.name != "base") == sorted(NAMES)
    for name in NAMES:
        assert f"deploy/kubernetes/variants/{name}" in text
    for key in SECRET_KEYS:
        assert f"--from-literal={key}=" in text


@pytest.mark.parametrize("variant", NAMES)
def test_the_rendered_variant_is_valid_offline(variant: str) -> None:
    docs = rendered(variant)
    errors = [line for d in docs for line in problems(d)]
    assert errors == []
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {
        "tokenplane"}


@pytest.mark.parametrize("variant", NAMES)
def test_the_gateway_config_is_one_serve_accepts(variant: str) -> None:
    deployment = only(variant, "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    (cm,) = [c for c in kinds(variant)["ConfigMap"]
             if c["metadata"]["name"] == volumes["config"]["configMap"]["name"]]
    data = yaml.safe_load(cm["data"]["config.yaml"])
    cfg = validate_config(data)
    assert preflight(cfg, env={"TOKENPLANE_CONSOLE_SECRET": "x" * 32}).errors == []
    c = gateway(variant)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert cfg.server.host == "0.0.0.0" and cfg.server.port == ports["http"]
    assert cfg.observe.metrics.listen == f"0.0.0.0:{ports['metrics']}"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert c["args"] == ["--config", f"{mounts['config']}/config.yaml"]
    assert cfg.data_dir == mounts["data"]
    env = {e["name"]: e for e in c["env"]}
    assert env["TOKENPLANE_HOME"]["value"] == mounts["data"]
    assert cfg.console.secret_env == "TOKENPLANE_CONSOLE_SECRET"
    assert cfg.database_url is None and cfg.redis_url is None  # never in the ConfigMap


@pytest.mark.parametrize("variant", NAMES)
def test_secrets_come_from_the_one_secret(variant: str) -> None:
    env = {e["name"]: e for e in gateway(variant)["env"]}
    refs = {name: e["valueFrom"]["secretKeyRef"] for name, e in env.items()
            if "valueFrom" in e}
    assert {r["name"] for r in refs.values()} == {SECRET}
    assert {r["key"] for r in refs.values()} <= SECRET_KEYS
    assert refs["TOKENPLANE_AUDIT_KEY"]["key"] == "audit-key"
    shared = variant != "single-box"
    assert ("TOKENPLANE_DATABASE_URL" in refs) is shared
    assert ("TOKENPLANE_REDIS_URL" in refs) is shared
    assert "Secret" not in kinds(variant)  # the Secret is the operator's, never in git


@pytest.mark.parametrize("variant", NAMES)
def test_pod_hardening_probes_and_resources(variant: str) -> None:
    spec = only(variant, "Deployment")["spec"]["template"]["spec"]
    c = gateway(variant)
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == 10001
    assert c["securityContext"]["readOnlyRootFilesystem"]
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert spec["terminationGracePeriodSeconds"] > 30 + 5  # the drain plus preStop
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health"
        assert c[probe]["httpGet"]["port"] in {p["name"] for p in c["ports"]}
    assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]
    assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}


@pytest.mark.parametrize("variant", NAMES)
def test_service_monitor_and_network_policy_select_the_gateway(variant: str) -> None:
    labels = only(variant, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = only(variant, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    monitor = only(variant, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"][
        "labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {
        p["name"] for p in service["spec"]["ports"]}
    policy = only(variant, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    allowed = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert allowed == {p["name"] for p in gateway(variant)["ports"]}


def test_single_box_keeps_its_data_on_a_claim() -> None:
    deployment = only("single-box", "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {
        "claimName": only("single-box", "PersistentVolumeClaim")["metadata"]["name"]}}
    assert "PodDisruptionBudget" not in kinds("single-box")
    assert "HorizontalPodAutoscaler" not in kinds("single-box")


@pytest.mark.parametrize("variant", ["ha", "keda"])
def test_replicated_variants(variant: str) -> None:
    deployment = only(variant, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] >= 3
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes["data"]  # no shared volume: the stores are external
    pdb = only(variant, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= spec["template"]["metadata"][
        "labels"].items()
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "PersistentVolumeClaim" not in kinds(variant)
    name = deployment["metadata"]["name"]
    if variant == "ha":
        hpa = only(variant, "HorizontalPodAutoscaler")
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                                 "name": name}
        assert hpa["spec"]["minReplicas"] == spec["replicas"]
        assert "ScaledObject" not in kinds(variant)
    else:
        scaled = only(variant, "ScaledObject")
        assert scaled["spec"]["scaleTargetRef"]["name"] == name
        assert scaled["spec"]["minReplicaCount"] == spec["replicas"]
        (trigger,) = scaled["spec"]["triggers"]
        assert trigger["type"] == "prometheus"
        assert "tokenplane_requests_total" in trigger["metadata"]["query"]
        assert "HorizontalPodAutoscaler" not in kinds(variant)  # KEDA makes its own


def test_a_planted_error_in_a_variant_is_caught() -> None:
    docs = [dict(d) for d in rendered("keda")]
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    bad = {**monitor, "spec": {**monitor["spec"], "endpoint": monitor["spec"]["endpoints"]}}
    assert problems(bad)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    bad = yaml.safe_load(yaml.safe_dump(deployment))
    bad["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["prot"] = 1
    assert problems(bad)
