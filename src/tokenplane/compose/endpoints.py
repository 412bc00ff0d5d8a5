"""Builds a pool's endpoints: simulated replicas in the gateway's process, or HTTP
replicas at a base URL (listed in the config, or found by discovery and added while
the gateway runs through ``routing.gateway.membership``)."""

from __future__ import annotations

from tokenplane.config.schema import AnthropicOptions, BackendConfig, ModelConfig
from tokenplane.engine.behaviour import SimBehaviour
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.service import EngineService
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.upstream.anthropic_transport import AnthropicTransport
from tokenplane.upstream.http_transport import HttpTransport
from tokenplane.upstream.inprocess import InProcessTransport
from tokenplane.upstream.pool import Endpoint
from tokenplane.upstream.types import Transport


def backend_id(model: ModelConfig, backend: BackendConfig, index: int) -> str:
    return backend.id or f"{model.alias}-{index}"


def sim_behaviour(backend: BackendConfig) -> SimBehaviour:
    """The behaviour a sim backend's options ask for (the defaults without them)."""
    o = backend.sim
    return SimBehaviour() if o is None else SimBehaviour(o.tool_call_rate, o.reasoning)


def sim_replica(
    model: ModelConfig, backend: BackendConfig, ep_id: str, counters: ModelCounters,
    seed: int = 0,
) -> tuple[Endpoint, EngineService]:
    """A simulated engine replica in this process (the caller starts and closes the
    service) and its endpoint."""
    upstream_model = backend.model or model.alias
    svc = EngineService(
        get_profile(backend.profile), counters.tokenizer(model.alias),
        counters.prompt_ids(model.alias), upstream_model,
        max_model_len=model.context_window, seed=seed, behaviour=sim_behaviour(backend),
    )
    return Endpoint(ep_id, backend, InProcessTransport(svc), upstream_model), svc


def http_endpoint(model: ModelConfig, backend: BackendConfig, ep_id: str,
                  base_url: str) -> Endpoint:
    """A replica served over HTTP at ``base_url``."""
    url = base_url.rstrip("/")
    return Endpoint(ep_id, backend, backend_transport(backend, url),
                    backend.model or model.alias, base_url=url)


def backend_transport(backend: BackendConfig, url: str) -> Transport:
    """How the backend's type is spoken to at ``url``."""
    if backend.type == "anthropic":
        o = backend.anthropic or AnthropicOptions.model_validate({})
        return AnthropicTransport(HttpTransport(url), backend.api_key_env, o.version,
                                  tuple(o.betas), o.default_max_tokens)
    return HttpTransport(url, backend.api_key_env)


def backend_endpoints(
    model: ModelConfig, backend: BackendConfig, index: int, counters: ModelCounters,
    services: list[EngineService],
) -> list[Endpoint]:
    """The endpoints a listed backend has at start (none for a discovered one: its
    replicas join while the gateway runs)."""
    bid = backend_id(model, backend, index)
    if backend.discovery is not None:
        return []
    if backend.type == "sim" and backend.base_url is None:
        out = []
        for r in range(backend.replicas):
            ep, svc = sim_replica(model, backend, f"{bid}/{r}", counters, seed=r)
            services.append(svc)
            out.append(ep)
        return out
    assert backend.base_url is not None
    return [http_endpoint(model, backend, bid, backend.base_url)]
