"""The ``cache:`` configuration section (docs/CACHE.md): the exact and the semantic
response caches, where they are kept, how hits are billed, and per tenant / app /
model rules that opt requests in or out."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# the semantic threshold shipped: precision >= 0.95 on bench/data/paraphrases.tsv
# (tests/cache/test_precision.py, docs/BENCHMARKS.md "Caches")
SHIPPED_THRESHOLD = 0.92


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExactCacheConfig(_Strict):
    """``enabled``: the exact cache serves requests no rule opts out. Only
    deterministic requests (``temperature: 0`` or a ``seed``) are cached unless
    ``nondeterministic`` (here or in a rule) opts the others in."""

    enabled: bool = True
    ttl_s: float = Field(3600.0, gt=0)
    max_entries: int = Field(10_000, ge=1)
    nondeterministic: bool = False


class SemanticCacheConfig(_Strict):
    """``enabled``: the default for requests no rule names (off: a rule opts an app or a
    model in). A hit: the user's turn within ``threshold`` cosine of a cached one, and
    everything else equal (docs/CACHE.md). ``max_entries`` over all partitions. As
    for the exact cache, only deterministic requests are stored and served unless
    ``nondeterministic`` (here or in a rule) opts the others in."""

    enabled: bool = False
    threshold: float = Field(SHIPPED_THRESHOLD, gt=0, le=1)
    ttl_s: float = Field(3600.0, gt=0)
    max_entries: int = Field(100_000, ge=1)
    nondeterministic: bool = False


class CacheBillingConfig(_Strict):
    """How a hit is billed: ``free`` (cost 0), or ``discounted``: ``charge`` times the
    list price of the tokens it saved. The ledger records the savings either way.
    ``tokens``: what a hit counts against token limits (tpm, tokens per day or month,
    tokens in flight): ``none`` (nothing ran upstream), ``charged`` (``charge`` times
    the saved tokens when discounted, none when free) or ``saved`` (all of them).
    Admission settles a hit at its billed cost and these tokens."""

    mode: Literal["free", "discounted"] = "free"
    charge: Decimal = Field(Decimal("0.1"), ge=0, le=1)
    tokens: Literal["none", "charged", "saved"] = "none"


class CacheRule(_Strict):
    """Applies to requests of the given tenant, app and model (unset: any); the first
    rule that matches sets what it names, the section's defaults the rest."""

    tenant: str | None = None
    app: str | None = None
    model: str | None = None
    exact: bool | None = None
    semantic: bool | None = None
    nondeterministic: bool | None = None
    threshold: float | None = Field(None, gt=0, le=1)


class CacheConfig(_Strict):
    """``store``: ``memory`` (each process its own) or ``redis`` (replicas share it;
    needs ``redis_url``), under ``key_prefix``. An answer larger than
    ``max_entry_bytes`` (a stream is kept as its events: about 300 bytes a token) is
    not stored; the memory store holds at most ``max_bytes`` of answers, the least
    recently used exact entries and the oldest semantic ones going first."""

    enabled: bool = True
    store: Literal["memory", "redis"] = "memory"
    key_prefix: str = Field("tokenplane:cache:", min_length=1)
    max_entry_bytes: int = Field(1 << 20, ge=1)
    max_bytes: int = Field(256 << 20, ge=1)
    exact: ExactCacheConfig = Field(default_factory=lambda: ExactCacheConfig())  # type: ignore[call-arg]
    semantic: SemanticCacheConfig = Field(default_factory=lambda: SemanticCacheConfig())  # type: ignore[call-arg]
    billing: CacheBillingConfig = Field(default_factory=lambda: CacheBillingConfig())  # type: ignore[call-arg]
    rules: list[CacheRule] = Field(default_factory=list)
