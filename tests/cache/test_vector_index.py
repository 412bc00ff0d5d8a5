"""The per-partition vector index and the embedded store: the sign-bit prefilter of
a large partition never drops a row above the threshold, TTLs and bounds hold, and
invalidation drops a tenant's (app's) entries only."""

from __future__ import annotations

import numpy as np

from tokenplane.cache.entry import Entry
from tokenplane.cache.memory_store import MemoryStore
from tokenplane.cache.vector_index import EXACT_ROWS, VectorIndex, rotation
from tokenplane.embeddings.model import normalised


def _unit(rng: np.random.Generator, n: int, dim: int = 512) -> np.ndarray:
    return normalised(rng.standard_normal((n, dim)))


def _near(rng: np.random.Generator, v: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at exactly cosine ``cos`` from unit ``v``."""
    r = rng.standard_normal(v.shape[0]).astype(np.float32)
    r -= (r @ v) * v
    r /= np.linalg.norm(r)
    out: np.ndarray = (cos * v + np.sqrt(1 - cos * cos) * r).astype(np.float32)
    return out


def test_prefilter_agrees_with_exact_search() -> None:
    rng = np.random.default_rng(1)
    index: VectorIndex[int] = VectorIndex(512, rotation(512))
    base = _unit(rng, EXACT_ROWS * 3)
    index.add_many(base, list(range(len(base))), expires=1e12)
    assert index.rows > EXACT_ROWS  # the prefilter path
    for i in range(60):
        target = int(rng.integers(len(base)))
        cos = float(rng.uniform(0.86, 0.99))
        q = _near(rng, base[target], cos)
        found = index.nearest(q, 0.85, now=0)
        exact = base @ q
        best = int(np.argmax(exact))
        assert found is not None and found[1] == best, i
        assert abs(found[0] - float(exact[best])) < 1e-5
    assert index.nearest(_unit(rng, 1)[0], 0.85, now=0) is None


def _entry(tenant: str, app: str, rid: str, now: float, ttl: float = 60) -> Entry:
    return Entry(rid, tenant, app, False, (b"{}",), 3, 4, now, now + ttl)


def test_store_ttl_bounds_and_invalidation() -> None:
    rng = np.random.default_rng(2)
    store = MemoryStore(exact_max=2, semantic_max=3, dim=512)
    for i in range(3):
        store.put_exact(f"k{i}", _entry("t", "a", f"r{i}", 0))
    assert store.get_exact("k0", 1) is None and store.get_exact("k2", 1) is not None
    assert store.get_exact("k2", 61) is None  # expired
    v = _unit(rng, 5)
    for i in range(4):
        store.put_semantic("p", v[i], [_entry("t", "a", f"s{i}", 0)])
    assert store.sizes()[1] == 3
    assert store.nearest("p", v[0], 0.99, 1) is None  # the oldest was evicted
    hit = store.nearest("p", v[3], 0.99, 1)
    assert hit is not None and hit[1].request_id == "s3"
    assert store.nearest("p", v[3], 0.99, 61) is None  # expired
    store.put_semantic("q", v[4], [_entry("t", "b", "other-app", 0)])
    store.put_exact("kb", _entry("u", "a", "other-tenant", 0))
    assert store.invalidate("t", "a") >= 3
    assert store.nearest("q", v[4], 0.99, 1) is not None
    assert store.get_exact("kb", 1) is not None
    assert store.invalidate("t") == 1


def test_store_holds_at_most_max_bytes() -> None:
    rng = np.random.default_rng(3)
    store = MemoryStore(exact_max=100, semantic_max=100, dim=512, max_bytes=1000)
    big = [Entry(f"r{i}", "t", "a", False, (b"x" * 300,), 1, 1, 0, 60) for i in range(5)]
    for i, e in enumerate(big[:4]):
        store.put_exact(f"k{i}", e)
    assert store.bytes <= 1000 and store.get_exact("k0", 1) is None  # least recent went
    assert store.get_exact("k3", 1) is not None
    v = _unit(rng, 3)
    for i in range(3):
        store.put_semantic("p", v[i], [Entry(f"s{i}", "t", "a", False, (b"y" * 300,),
                                             1, 1, 0, 60)])
    assert store.bytes <= 1000
    assert store.nearest("p", v[2], 0.99, 1) is not None  # the newest stays
    store.invalidate("t")
    assert store.bytes == 0


def test_only_complete_answers_with_usage_are_kept() -> None:
    from tokenplane.cache.gateway.service import answer_usage

    body = (b'{"choices":[{"message":{"content":"hi"}}],'
            b'"usage":{"prompt_tokens":5,"completion_tokens":2}}')
    assert answer_usage((body,), False) == (5, 2)
    assert answer_usage((b'{"choices":[]}',), False) is None  # no usage
    assert answer_usage((b'{"error":{"message":"x"}}',), False) is None
    assert answer_usage((b"not json",), False) is None
    events = (b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n',
              b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}\n\n'
              b"data: [DONE]\n\n")
    assert answer_usage(events, True) == (5, 1)
    broken = (events[0], b'data: {"error":{"message":"upstream timeout"}}\n\n')
    assert answer_usage(broken, True) is None
