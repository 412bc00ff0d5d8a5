"""The shared store: Redis, so that every gateway replica serves what any of them
cached.

Redis 7.0 as shipped has no vector search (no ``FT.*`` commands without the search
module; ``MODULE LIST`` is empty here), so the gateway searches itself: each
semantic partition is a Redis list of records (expiry, entry id, the normalised
vector), appended by whoever fills it, and each gateway keeps a mirror of the
partitions it looks up as a :class:`~tokenplane.cache.vector_index.VectorIndex`.
One script call per lookup brings the mirror up to date (only the records it has
not seen) and the search is the in-process one. The entries themselves are keys of
their own with a TTL, read on a hit only.

Every key holds the tenant's and the app's *generation*: invalidation increments it,
so no lookup can reach an older entry again (and the older keys are deleted, or
expire). A partition list longer than the bound is cut to its newest half; its
``:base`` counts the records cut, so mirrors keep absolute positions.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import redis.asyncio as aioredis

from tokenplane.cache.entry import Entry
from tokenplane.cache.keys import digest
from tokenplane.cache.vector_index import VectorIndex, rotation

_GENS = """
local tg = redis.call('GET', KEYS[1]) or '0'
local ag = redis.call('GET', KEYS[2]) or '0'
return ARGV[1] .. tg .. '.' .. ag .. ARGV[2]
"""

GET_EXACT = _GENS.replace("return ARGV[1]", "local name = ARGV[1]") + """
return redis.call('GET', name)
"""

PUT_EXACT = _GENS.replace("return ARGV[1]", "local name = ARGV[1]") + """
redis.call('SET', name, ARGV[3], 'PX', ARGV[4])
return 1
"""

SYNC = _GENS.replace("return ARGV[1]", "local name = ARGV[1]") + """
local base = tonumber(redis.call('GET', name .. ':base') or '0')
local known = tonumber(ARGV[4])
local full = 1
local start = 0
if name == ARGV[3] and known >= base then
  full = 0
  start = known - base
end
return {name, base, full, redis.call('LRANGE', name, start, -1)}
"""

PUT_SEMANTIC = _GENS.replace("return ARGV[1]", "local name = ARGV[1]") + """
redis.call('SET', name .. ':e:' .. ARGV[4], ARGV[5], 'PX', ARGV[6])
local n = redis.call('RPUSH', name, ARGV[3])
redis.call('PEXPIRE', name, ARGV[6])
local bound = tonumber(ARGV[7])
if n > bound then
  local cut = n - math.floor(bound / 2)
  redis.call('LTRIM', name, cut, -1)
  redis.call('INCRBY', name .. ':base', cut)
end
redis.call('PEXPIRE', name .. ':base', ARGV[6])
return n
"""

_HEAD = struct.Struct("<d16s")  # expiry (epoch s), entry id (16 bytes)


@dataclass
class _Mirror:
    name: str
    count: int  # absolute records seen (base included)
    index: VectorIndex[str]


class RedisStore:
    def __init__(self, client: aioredis.Redis, prefix: str, semantic_max: int,
                 dim: int = 512) -> None:
        self.client = client
        self.prefix = prefix
        self.semantic_max = semantic_max
        self.dim = dim
        self._rotate = rotation(dim)
        self._mirrors: OrderedDict[str, _Mirror] = OrderedDict()  # by (T, A, partition)
        self._rows = 0  # rows over all mirrors
        self._get_exact = client.register_script(GET_EXACT)
        self._put_exact = client.register_script(PUT_EXACT)
        self._sync = client.register_script(SYNC)
        self._put_semantic = client.register_script(PUT_SEMANTIC)

    @classmethod
    def from_url(cls, url: str, prefix: str, semantic_max: int, dim: int = 512
                 ) -> RedisStore:
        return cls(aioredis.Redis.from_url(url), prefix, semantic_max, dim)

    # -- naming ---------------------------------------------------------------------

    def _ids(self, tenant: str, app: str) -> tuple[str, str]:
        return digest([tenant])[:16], digest([tenant, app])[:16]

    def _gen_keys(self, tenant: str, app: str) -> list[str]:
        t, a = self._ids(tenant, app)
        return [f"{self.prefix}gen:{t}", f"{self.prefix}gen:{t}:{a}"]

    def _head(self, kind: str, tenant: str, app: str) -> str:
        t, a = self._ids(tenant, app)
        return f"{self.prefix}{kind}:{t}:{a}:"

    # -- exact ----------------------------------------------------------------------

    async def get_exact(self, tenant: str, app: str, key: str, now: float) -> Entry | None:
        raw = await self._get_exact(keys=self._gen_keys(tenant, app),
                                    args=[self._head("x", tenant, app), ":" + key])
        if raw is None:
            return None
        entry = Entry.from_bytes(raw)
        return entry if entry.expires > now else None

    async def put_exact(self, key: str, entry: Entry) -> None:
        ttl_ms = max(1, int((entry.expires - entry.created) * 1000))
        await self._put_exact(keys=self._gen_keys(entry.tenant, entry.app),
                              args=[self._head("x", entry.tenant, entry.app), ":" + key,
                                    entry.to_bytes(), ttl_ms])

    # -- semantic -------------------------------------------------------------------

    def _mirror(self, tenant: str, app: str, partition: str) -> tuple[str, _Mirror | None]:
        t, a = self._ids(tenant, app)
        mkey = f"{t}:{a}:{partition}"
        return mkey, self._mirrors.get(mkey)

    def _unpack(self, records: list[bytes]) -> tuple[npt.NDArray[np.float32], list[str],
                                                      npt.NDArray[np.float64]]:
        n = len(records)
        vecs = np.empty((n, self.dim), dtype=np.float32)
        expires = np.empty(n, dtype=np.float64)
        ids: list[str] = []
        size = _HEAD.size
        for i, rec in enumerate(records):
            exp, eid = _HEAD.unpack_from(rec)
            expires[i] = exp
            ids.append(eid.hex())
            vecs[i] = np.frombuffer(rec, dtype=np.float32, count=self.dim, offset=size)
        return vecs, ids, expires

    async def _synced(self, tenant: str, app: str, partition: str) -> _Mirror:
        mkey, mirror = self._mirror(tenant, app, partition)
        name, known = (mirror.name, mirror.count) if mirror is not None else ("", 0)
        reply: list[Any] = await self._sync(
            keys=self._gen_keys(tenant, app),
            args=[self._head("s", tenant, app), ":" + partition, name, known])
        got_name = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        base, full, records = int(reply[1]), int(reply[2]), list(reply[3])
        if mirror is None or full:
            if mirror is not None:
                self._rows -= mirror.index.rows
            mirror = _Mirror(got_name, base, VectorIndex(self.dim, self._rotate))
            self._mirrors[mkey] = mirror
        self._mirrors.move_to_end(mkey)
        if records:
            vecs, ids, expires = self._unpack(records)
            rows = mirror.index.add_many(vecs, list(ids), float(expires.max()))
            mirror.index.expires[rows[0]:rows[-1] + 1] = expires
            mirror.count += len(records)
            self._rows += len(records)
        self._bound()
        return mirror

    def _bound(self) -> None:
        """Drops the least recently used mirrors beyond ``semantic_max`` rows (they are
        reloaded from Redis when next looked up)."""
        while self._rows > self.semantic_max and len(self._mirrors) > 1:
            _, old = self._mirrors.popitem(last=False)
            self._rows -= old.index.rows

    async def nearest(self, tenant: str, app: str, partition: str,
                      vec: npt.NDArray[np.float32], threshold: float, now: float
                      ) -> tuple[float, Entry] | None:
        mirror = await self._synced(tenant, app, partition)
        found = mirror.index.nearest(vec, threshold, now)
        if found is None:
            return None
        score, eid = found
        raw = await self.client.get(f"{mirror.name}:e:{eid}")
        if not isinstance(raw, bytes):
            return None
        entry = Entry.from_bytes(raw)
        return (score, entry) if entry.expires > now else None

    async def put_semantic(self, partition: str, vec: npt.NDArray[np.float32],
                           entry: Entry) -> None:
        eid = bytes.fromhex(digest([entry.request_id, partition]))
        record = _HEAD.pack(entry.expires, eid) + np.asarray(vec, dtype=np.float32).tobytes()
        ttl_ms = max(1, int((entry.expires - entry.created) * 1000))
        await self._put_semantic(
            keys=self._gen_keys(entry.tenant, entry.app),
            args=[self._head("s", entry.tenant, entry.app), ":" + partition, record,
                  eid.hex(), entry.to_bytes(), ttl_ms, self.semantic_max])

    # -- housekeeping ---------------------------------------------------------------

    async def invalidate(self, tenant: str, app: str | None) -> int:
        """Moves the tenant (or its app) to a new generation, then deletes the keys of
        the old one."""
        t, a = self._ids(tenant, app or "")
        if app is None:
            await self.client.incr(f"{self.prefix}gen:{t}")
            patterns = [f"{self.prefix}x:{t}:*", f"{self.prefix}s:{t}:*"]
        else:
            await self.client.incr(f"{self.prefix}gen:{t}:{a}")
            patterns = [f"{self.prefix}x:{t}:{a}:*", f"{self.prefix}s:{t}:{a}:*"]
        deleted = 0
        for pattern in patterns:
            batch: list[Any] = []
            async for key in self.client.scan_iter(match=pattern, count=500):
                batch.append(key)
                if len(batch) >= 500:
                    deleted += int(await self.client.unlink(*batch))
                    batch = []
            if batch:
                deleted += int(await self.client.unlink(*batch))
        drop = [k for k in self._mirrors if k.startswith(f"{t}:" if app is None else f"{t}:{a}:")]
        for k in drop:
            self._rows -= self._mirrors.pop(k).index.rows
        return deleted

    async def close(self) -> None:
        await self.client.aclose()
