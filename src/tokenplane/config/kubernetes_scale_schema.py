"""Config of the Kubernetes actuator (``autoscale.pools.<alias>.kubernetes``): the
workload whose ``/scale`` subresource sets the pool's serving replicas, and the
optional second workload that holds its warm replicas (docs/DISCOVERY.md,
"The Kubernetes actuator")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

WorkloadKind = Literal["Deployment", "StatefulSet", "LeaderWorkerSet"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KubernetesScaleConfig(_Strict):
    """``kind`` / ``name``: the workload serving the pool (its pods are the Service's
    endpoints). ``warm_name``: a second workload of the same kind, the same pod
    template and labels the Service does not select: its pods are started and loaded
    but take no traffic (none: no warm pool on Kubernetes; the policy's warm figure
    is then only reported). ``kubeconfig``: none in a pod (its service account)."""

    kind: WorkloadKind = "Deployment"
    name: str = Field(min_length=1)
    namespace: str = Field("default", min_length=1)
    warm_name: str | None = Field(None, min_length=1)
    kubeconfig: str | None = None

    @model_validator(mode="after")
    def _distinct(self) -> KubernetesScaleConfig:
        if self.warm_name == self.name:
            raise ValueError("warm_name must name another workload than name")
        return self
