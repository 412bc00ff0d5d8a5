"""One semantic partition's vectors: a numpy matrix of normalised float32 rows, and
the nearest row above a threshold.

Up to ``EXACT_ROWS`` rows a lookup is one matrix-vector product (exact cosine). Above
it, a sign-bit prefilter first: each row also keeps the signs of its randomly rotated
vector (512 bits, SimHash), stored as 8 bit planes of uint64 so that a lookup XORs and
popcounts 8 contiguous arrays (about 2 ms for 100k rows). Two unit vectors at angle
``a`` disagree in a fraction ``a / pi`` of random-hyperplane signs, so a row whose
cosine reaches the threshold ``t`` differs in about ``dim * acos(t) / pi`` bits; rows
within that plus six standard deviations are scored exactly, the rest cannot be above
``t`` (short of a 1-in-10^9 event). The verdict is always the exact cosine.
"""

from __future__ import annotations

import math
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")
EXACT_ROWS = 4096  # at most this many rows: exact scores for all, no prefilter
ROTATION_SEED = 20261202


def rotation(dim: int) -> npt.NDArray[np.float32]:
    """A fixed random orthogonal matrix (the same in every process)."""
    rng = np.random.default_rng(ROTATION_SEED)
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    q *= np.sign(np.diag(r))
    out: npt.NDArray[np.float32] = q.astype(np.float32)
    return out


def hamming_bound(dim: int, threshold: float) -> int:
    """The most sign bits a row at cosine >= ``threshold`` differs in (6 sigma)."""
    p = math.acos(max(-1.0, min(1.0, threshold))) / math.pi
    return math.ceil(dim * p + 6 * math.sqrt(dim * p * (1 - p)) + 1)


class VectorIndex(Generic[T]):
    """Rows of (vector, item, expiry). Removed and expired rows are skipped and
    compacted away once they are half the matrix."""

    def __init__(self, dim: int, rotate: npt.NDArray[np.float32], capacity: int = 64) -> None:
        self.dim = dim
        self.words = dim // 64
        self._rotate = rotate
        self.vecs = np.zeros((capacity, dim), dtype=np.float32)
        self.bits = np.zeros((self.words, capacity), dtype=np.uint64)
        self.expires = np.zeros(capacity, dtype=np.float64)
        self.items: list[T | None] = []
        self.dead = 0

    def __len__(self) -> int:
        return len(self.items) - self.dead

    @property
    def rows(self) -> int:
        return len(self.items)

    def signs(self, vecs: npt.NDArray[np.float32]) -> npt.NDArray[np.uint64]:
        """The sign bits of rotated rows, as (rows, words) uint64."""
        packed = np.packbits((vecs @ self._rotate) > 0, axis=1)
        out: npt.NDArray[np.uint64] = np.ascontiguousarray(packed).view(np.uint64)
        return out

    def _grow(self, need: int) -> None:
        cap = self.vecs.shape[0]
        if need <= cap:
            return
        new = max(need, cap * 2)
        vecs = np.zeros((new, self.dim), dtype=np.float32)
        vecs[:cap] = self.vecs
        bits = np.zeros((self.words, new), dtype=np.uint64)
        bits[:, :cap] = self.bits
        expires = np.zeros(new, dtype=np.float64)
        expires[:cap] = self.expires
        self.vecs, self.bits, self.expires = vecs, bits, expires

    def add_many(self, vecs: npt.NDArray[np.float32], items: list[T], expires: float
                 ) -> list[int]:
        """Appends rows; returns their row numbers."""
        n0, k = self.rows, len(items)
        self._grow(n0 + k)
        self.vecs[n0:n0 + k] = vecs
        self.bits[:, n0:n0 + k] = self.signs(vecs).T
        self.expires[n0:n0 + k] = expires
        self.items.extend(items)
        return list(range(n0, n0 + k))

    def add(self, vec: npt.NDArray[np.float32], item: T, expires: float) -> int:
        return self.add_many(vec.reshape(1, -1), [item], expires)[0]

    def remove(self, row: int) -> T | None:
        item = self.items[row] if 0 <= row < self.rows else None
        if item is not None:
            self.items[row] = None
            self.expires[row] = 0.0
            self.dead += 1
        return item

    def _candidates(self, query: npt.NDArray[np.float32], threshold: float
                    ) -> npt.NDArray[np.intp] | None:
        n = self.rows
        if n <= EXACT_ROWS:
            return None
        q = self.signs(query.reshape(1, -1))[0]
        bits = self.bits
        dist = np.bitwise_count(bits[0, :n] ^ q[0]).astype(np.uint16)
        for w in range(1, self.words):
            dist += np.bitwise_count(bits[w, :n] ^ q[w])
        found: npt.NDArray[np.intp] = np.flatnonzero(dist <= hamming_bound(self.dim, threshold))
        return found

    def nearest(self, query: npt.NDArray[np.float32], threshold: float, now: float
                ) -> tuple[float, T] | None:
        """The live row with the highest cosine, if it reaches ``threshold``."""
        n = self.rows
        if n == 0:
            return None
        rows = self._candidates(query, threshold)
        if rows is None:
            scores = self.vecs[:n] @ query
            scores[self.expires[:n] <= now] = -2.0
            best = int(np.argmax(scores))
            score = float(scores[best])
        else:
            if rows.size == 0:
                return None
            scores = self.vecs[rows] @ query
            scores[self.expires[rows] <= now] = -2.0
            pick = int(np.argmax(scores))
            best, score = int(rows[pick]), float(scores[pick])
        item = self.items[best]
        if score < threshold or item is None:
            return None
        return score, item

    def compact(self, now: float) -> dict[int, int]:
        """Drops removed and expired rows when they are at least half; returns the
        moves (old row -> new row) of the rows kept (empty when nothing moved)."""
        n = self.rows
        expired = [i for i in range(n) if self.items[i] is not None and self.expires[i] <= now]
        for i in expired:
            self.remove(i)
        if self.dead * 2 < n or n == 0:
            return {}
        keep = [i for i in range(n) if self.items[i] is not None]
        moves = {old: new for new, old in enumerate(keep)}
        idx = np.asarray(keep, dtype=np.intp)
        k = len(keep)
        self.vecs[:k] = self.vecs[idx]
        self.bits[:, :k] = self.bits[:, idx]
        self.expires[:k] = self.expires[idx]
        self.expires[k:n] = 0.0
        self.items = [self.items[i] for i in keep]
        self.dead = 0
        return moves
