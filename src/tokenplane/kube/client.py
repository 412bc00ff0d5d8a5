"""An API client for the cluster: the pod's service account when the gateway runs in
Kubernetes (and no kubeconfig is named), else a kubeconfig file (the one named, else
``$KUBECONFIG``, else ``~/.kube/config``)."""

from __future__ import annotations

import os

from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration


async def api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """A new client (the caller closes it)."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        cfg = Configuration()
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return ApiClient(configuration=cfg)
    client: ApiClient = await config.new_client_from_config(
        config_file=kubeconfig, context=context, persist_config=False)
    return client
