"""What the cache stage leaves on a request: the hit it serves, or what to store once
the upstream has answered (a miss)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tokenplane.cache.entry import Entry
from tokenplane.cache.keys import Scope, SemanticKey

EXACT = "exact"
SEMANTIC = "semantic"


@dataclass(frozen=True, slots=True)
class CacheHit:
    kind: str  # EXACT | SEMANTIC
    entry: Entry
    score: float = 1.0  # the cosine of a semantic hit


@dataclass(slots=True)
class CacheFill:
    """A miss: where its answer goes (the exact key, the semantic partition and the
    user turn's vector), each None when that cache does not apply."""

    scope: Scope
    exact_key: str | None
    semantic: SemanticKey | None
    vector: npt.NDArray[np.float32] | None
