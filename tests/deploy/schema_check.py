"""Offline schema validation of the Kubernetes manifests in deploy/kubernetes/.

Built-in kinds: the JSON schemas ``kubernetes-validate`` ships (derived from each
Kubernetes release's OpenAPI document, in its package: no network), strict
variant (unknown fields are errors, as ``kubectl apply`` with server-side field
validation reports them). The ScaledObject: the openAPIV3Schema of KEDA's CRD,
vendored in schemas/ (Apache-2.0), validated with ``jsonschema`` after marking
every object without ``x-kubernetes-preserve-unknown-fields`` closed, so an unknown
or misspelled field is an error there too instead of being pruned silently.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy/kubernetes"
KEDA_CRD = Path(__file__).resolve().parent / "schemas/keda.sh_scaledobjects.yaml"
# The oldest Kubernetes the manifests claim to work on, and the newest whose schemas
# the installed kubernetes-validate ships.
OLDEST_KUBERNETES = "1.30"


def kubernetes_versions() -> tuple[str, ...]:
    newest = kubernetes_validate.utils.latest_version().rsplit(".", 1)[0]
    return (OLDEST_KUBERNETES, newest)


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of one file (empty ones dropped)."""
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def manifest_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def _closed(schema: Any) -> Any:
    """A copy where each object schema with ``properties`` rejects other fields."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def keda_crd() -> dict[str, Any]:
    (crd,) = documents(KEDA_CRD)
    assert crd["kind"] == "CustomResourceDefinition"
    return dict(crd)


@cache
def keda_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    """(apiVersion, kind) -> a validator for each served version of the CRD."""
    crd = keda_crd()
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    out: dict[tuple[str, str], jsonschema.protocols.Validator] = {}
    for version in crd["spec"]["versions"]:
        if not version.get("served"):
            continue
        schema = _closed(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
        jsonschema.Draft7Validator.check_schema(schema)
        out[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return out


_LABEL_SELECTOR: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["key", "operator"],
            "properties": {"key": {"type": "string"},
                           "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                           "values": {"type": "array", "items": {"type": "string"}}}}},
    },
}
# The Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1): the part of its
# API reference our manifests use, written here (closed: another field is an error,
# so a misspelling is caught; a field we start to use is added here first).
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "spec": {"type": "object", "additionalProperties": False,
                 "required": ["selector", "endpoints"], "properties": {
            "jobLabel": {"type": "string"},
            "selector": _LABEL_SELECTOR,
            "namespaceSelector": {"type": "object", "additionalProperties": False,
                                  "properties": {"any": {"type": "boolean"},
                                                 "matchNames": {"type": "array",
                                                                "items": {"type": "string"}}}},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "properties": {
                    "port": {"type": "string"},
                    "targetPort": {"type": ["string", "integer"]},
                    "path": {"type": "string", "pattern": "^/"},
                    "scheme": {"enum": ["http", "https"]},
                    "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                    "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                    "honorLabels": {"type": "boolean"},
                    "bearerTokenSecret": {"type": "object", "additionalProperties": False,
                                          "required": ["key"], "properties": {
                                              "name": {"type": "string"},
                                              "key": {"type": "string"},
                                              "optional": {"type": "boolean"}}}}}},
        }},
    },
}


def problems(doc: dict[str, Any]) -> list[str]:
    """Every schema error of one manifest document, as 'where: what' lines; a kind
    neither schema set knows is an error too (nothing passes unchecked)."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    name = (doc.get("metadata") or {}).get("name", "?")
    where = f"{kind}/{name}"
    if (api_version, kind) == ("monitoring.coreos.com/v1", "ServiceMonitor"):
        checker = jsonschema.Draft7Validator(SERVICE_MONITOR_SCHEMA)
        return [f"{where} (ServiceMonitor): {_path(e.absolute_path)}: {e.message}"
                for e in checker.iter_errors(doc)]
    validator = keda_validators().get((str(api_version), str(kind)))
    if validator is not None:
        return [f"{where} (KEDA CRD): {_path(e.absolute_path)}: {e.message}"
                for e in validator.iter_errors(doc)]
    out: list[str] = []
    for version in kubernetes_versions():
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            out.append(f"{where} (Kubernetes {version}): {_path(e.absolute_path)}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            out.append(f"{where}: no schema: {e.message}")
    return out


def _path(parts: Iterator[Any] | Any) -> str:
    return ".".join(str(p) for p in parts) or "(root)"
