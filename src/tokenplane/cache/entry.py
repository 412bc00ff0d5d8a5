"""A cached answer: the upstream's bytes as they came (the JSON body, or a stream's
SSE items), whose request it was, its token counts, and when it expires."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class Entry:
    request_id: str  # the request whose answer this is (the hit's source request)
    tenant: str
    app: str
    stream: bool
    payload: tuple[bytes, ...]  # non-stream: (body,); stream: the items as relayed
    prompt_tokens: int
    output_tokens: int
    created: float
    expires: float
    seq: int = 0  # the store's insertion number (eviction order)

    def to_bytes(self) -> bytes:
        return orjson.dumps({
            "r": self.request_id, "t": self.tenant, "a": self.app, "s": self.stream,
            "p": [p.decode("utf-8", "surrogateescape") for p in self.payload],
            "i": self.prompt_tokens, "o": self.output_tokens, "c": self.created,
            "e": self.expires,
        })

    @classmethod
    def from_bytes(cls, data: bytes) -> Entry:
        d: dict[str, Any] = orjson.loads(data)
        return cls(str(d["r"]), str(d["t"]), str(d["a"]), bool(d["s"]),
                   tuple(p.encode("utf-8", "surrogateescape") for p in d["p"]),
                   int(d["i"]), int(d["o"]), float(d["c"]), float(d["e"]))

    def size(self) -> int:
        return sum(len(p) for p in self.payload)
