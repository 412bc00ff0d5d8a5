"""Where a backend's replicas are found when they are discovered instead of listed
(``backends[].discovery``; docs/DISCOVERY.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KubernetesDiscovery(_Strict):
    """The ready endpoints of a Service's EndpointSlices (list, then watch).

    ``port_name``: the slice port to use (None: the slice's only or first port).
    ``kubeconfig``: a kubeconfig file (None: the in-cluster service account when the
    gateway runs in a pod, else ``$KUBECONFIG`` or ``~/.kube/config``)."""

    kind: Literal["kubernetes"]
    service: str = Field(min_length=1)
    namespace: str = Field("default", min_length=1)
    port_name: str | None = None
    kubeconfig: str | None = None
    scheme: Literal["http", "https"] = "http"


class DnsDiscovery(_Strict):
    """A name resolved every ``interval_s``: A records (with ``port``) or SRV records
    (their own ports and targets). ``nameserver`` (``host`` or ``host:port``): ask
    this server instead of the system's resolver."""

    kind: Literal["dns"]
    name: str = Field(min_length=1)
    record: Literal["A", "SRV"] = "A"
    port: int | None = Field(None, ge=1, le=65535)
    interval_s: float = Field(10.0, gt=0)
    nameserver: str | None = None
    scheme: Literal["http", "https"] = "http"

    @field_validator("nameserver")
    @classmethod
    def _nameserver(cls, v: str | None) -> str | None:
        if v is None or v.count(":") != 1:  # none, a host name, an IPv6 address
            if v is not None and not v.strip():
                raise ValueError("an empty nameserver: give host or host:port")
            return v
        host, _, port = v.partition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"{v!r} is not host or host:port (a port in 1..65535)")
        return v

    @model_validator(mode="after")
    def _port(self) -> DnsDiscovery:
        if self.record == "A" and self.port is None:
            raise ValueError("an A-record discovery needs the replicas' port")
        if self.record == "SRV" and self.port is not None:
            raise ValueError("SRV records carry their own ports: remove port")
        return self


DiscoveryConfig = Annotated[KubernetesDiscovery | DnsDiscovery, Field(discriminator="kind")]
