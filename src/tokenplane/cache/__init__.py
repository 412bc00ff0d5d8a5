"""Response caches, tenant-scoped by construction (docs/CACHE.md): the keys and
fingerprints of a request, the policy that says which requests may be cached, the
cached entries, the per-partition vector index and the embedded store. Pure: the
Redis store and the pipeline stage live in ``cache/gateway`` and ``pipeline``."""
