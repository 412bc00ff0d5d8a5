"""Builds the response cache from ``config.cache`` (None when absent or disabled)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tokenplane.cache.gateway.embedded import EmbeddedStore
from tokenplane.cache.gateway.redis_store import RedisStore
from tokenplane.cache.gateway.service import ResponseCache
from tokenplane.cache.store import CacheStore
from tokenplane.config.schema import GatewayConfig
from tokenplane.embeddings.model import UseEmbedder


def alias_versions(config: GatewayConfig) -> dict[str, str]:
    """Each alias's model version for cache scopes: its backends' versions, sorted and
    joined ("" when none is set). A new version deployed is a new scope."""
    out: dict[str, str] = {}
    for m in config.models:
        versions = sorted({b.model_version or "" for b in m.backends})
        out[m.alias] = ",".join(versions)
    return out


def build_cache(config: GatewayConfig, registry: CollectorRegistry) -> ResponseCache | None:
    cfg = config.cache
    if cfg is None or not cfg.enabled:
        return None
    embedder = UseEmbedder()
    store: CacheStore
    if cfg.store == "redis":
        assert config.redis_url is not None  # the schema requires it
        store = RedisStore.from_url(config.redis_url, cfg.key_prefix,
                                    cfg.semantic.max_entries, embedder.dim)
    else:
        store = EmbeddedStore(cfg.exact.max_entries, cfg.semantic.max_entries, embedder.dim,
                              cfg.max_bytes)
    versions = alias_versions(config)
    return ResponseCache(cfg, store, embedder, registry, lambda alias: versions.get(alias, ""))
