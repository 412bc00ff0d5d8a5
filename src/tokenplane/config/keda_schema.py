"""Config section ``autoscale.keda:``: the KEDA external scaler's listener
(docs/KEDA.md). Off unless ``listen`` is set."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator


class KedaConfig(BaseModel):
    """``listen``: ``host:port`` where tokenplane serves KEDA's external scaler gRPC
    protocol (e.g. ``0.0.0.0:9465`` in a pod, reached through the gateway's Service;
    ``null``, the default: not served). Only KEDA's operator should reach it: it
    answers without authentication, like the metrics listener on loopback."""

    model_config = ConfigDict(extra="forbid")

    listen: str | None = None

    @field_validator("listen")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is not None:
            host, sep, port = v.rpartition(":")
            host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
            if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
                raise ValueError("must be host:port, e.g. 127.0.0.1:9465")
        return v
