"""The iteration-level core of the simulated vLLM-like engine.

One ``step(now)`` is one forward pass: the scheduler (modelled on vLLM v1) first
gives every running request its next tokens (one for a decode, a chunk for a
prefill) under ``max_num_batched_tokens``, preempting the most recently admitted
requests by recompute when the KV cache runs out of blocks, then admits waiting
requests FCFS while ``max_num_seqs``, the token budget and free blocks allow,
reusing cached prefix blocks. The step's duration comes from the profile's model

    T = max(t_floor, a * N) + b * sum(decode context lengths) + c * sum(prefill chunk^2)

optionally scaled by seeded Gaussian jitter, plus, when the profile has a host-DRAM
KV tier, ``loaded blocks x host_load_s_per_block`` for the prefix blocks that the
step's admissions copy back from host memory (a load stalls the step that needs
it; recompute is avoided). The core has no clock: the caller
passes ``now`` and advances its own time by ``StepResult.duration``, so the same
engine runs in real time (service.py) and in virtual time (virtual.py, the cluster
simulator). Work is per request per step, never per token.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.engine.kv_cache import KVCache
from tokenplane.engine.profiles import EngineProfile


@dataclass
class EngineRequest:
    request_id: str
    prompt_len: int
    max_tokens: int
    block_hashes: Sequence[int] = ()
    arrival: float = 0.0


@dataclass
class FinishedRequest:
    request_id: str
    prompt_len: int
    output_tokens: int
    cached_tokens: int
    preemptions: int
    aborted: bool
    host_cached_tokens: int = 0  # of cached_tokens, those loaded from the host tier


@dataclass
class StepResult:
    start: float
    duration: float
    emitted: dict[str, int]
    finished: list[FinishedRequest]
    preempted: list[str]
    num_batched_tokens: int


@dataclass
class EngineStats:
    num_running: int
    num_waiting: int
    kv_usage: float
    kv_blocks_used: int
    kv_blocks_total: int
    prefix_queries: int
    prefix_hits: int
    preemptions_total: int
    prompt_tokens_total: int
    generation_tokens_total: int
    kv_blocks_cached: int = 0  # blocks held by the prefix cache (referenced or idle)
    host_prefix_hits: int = 0  # of prefix_hits, tokens loaded from the host-DRAM tier
    host_kv_blocks_cached: int = 0
    host_kv_blocks_total: int = 0
    host_blocks_loaded_total: int = 0


class _Seq:
    """Scheduler state of one request."""

    __slots__ = (
        "cached_refs", "cached_tokens", "hashes", "host_tokens", "max_tokens", "num_blocks",
        "num_computed", "num_private", "num_tokens", "output", "preemptions", "prompt_len",
        "reg", "rid", "scheduled_once",
    )

    def __init__(self, req: EngineRequest) -> None:
        self.rid = req.request_id
        self.prompt_len = req.prompt_len
        self.max_tokens = req.max_tokens
        self.hashes = req.block_hashes
        self.num_tokens = req.prompt_len  # tokens known: prompt + generated
        self.num_computed = 0  # tokens whose KV is in the cache
        self.output = 0
        self.cached_refs: list[int] = []
        self.num_private = 0
        self.num_blocks = 0
        self.reg = 0  # prompt blocks already offered to the prefix cache
        self.cached_tokens = 0
        self.host_tokens = 0
        self.preemptions = 0
        self.scheduled_once = False

    def finished(self, aborted: bool) -> FinishedRequest:
        return FinishedRequest(
            self.rid, self.prompt_len, self.output, self.cached_tokens, self.preemptions, aborted,
            self.host_tokens,
        )


@dataclass
class _Counters:
    prefix_queries: int = 0
    prefix_hits: int = 0
    host_prefix_hits: int = 0
    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0


class Engine:
    """A vLLM-like engine driven one iteration at a time by its caller's clock."""

    def __init__(self, profile: EngineProfile, *, seed: int = 0, jitter: float = 0.0) -> None:
        if jitter < 0:
            raise ValueError("jitter must be >= 0")
        self.profile = profile
        self._kv = KVCache(profile.kv_capacity_blocks, profile.block_size,
                           profile.host_kv_blocks)
        self._load_s_per_block = profile.host_load_s_per_block if profile.host_kv_blocks else 0.0
        self._loaded = 0  # blocks loaded from the host tier by the step being built
        self._bs = profile.block_size
        self._running: list[_Seq] = []
        self._waiting: deque[_Seq] = deque()
        self._seqs: dict[str, _Seq] = {}
        self._rng = random.Random(seed)
        self._jitter = jitter
        self._c = _Counters()
        # every step takes this many times as long (a degraded GPU, a noisy neighbour):
        # the simulator's fault injection; 1.0 is healthy
        self.slowdown = 1.0

    # --- requests ----------------------------------------------------------------------
    def add(self, req: EngineRequest, now: float) -> None:
        """Queue a request (FCFS). Raises ValueError for one that can never run."""
        if req.request_id in self._seqs:
            raise ValueError(f"duplicate request id {req.request_id!r}")
        if req.prompt_len < 1 or req.max_tokens < 1:
            raise ValueError("prompt_len and max_tokens must be >= 1")
        blocks = -(-(req.prompt_len + req.max_tokens) // self._bs)
        if blocks > self._kv.total:
            raise ValueError(
                f"request needs {blocks} KV blocks but the cache holds {self._kv.total}"
            )
        seq = _Seq(req)
        self._seqs[req.request_id] = seq
        self._waiting.append(seq)

    def abort(self, request_id: str) -> FinishedRequest | None:
        """Stop a request now and free its blocks; None if it is not in the engine."""
        seq = self._seqs.pop(request_id, None)
        if seq is None:
            return None
        if seq in self._waiting:
            self._waiting.remove(seq)
        else:
            self._running.remove(seq)
        self._kv.release(seq.cached_refs, seq.num_private)
        seq.cached_refs = []
        seq.num_private = seq.num_blocks = 0
        return seq.finished(aborted=True)

    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

    @property
    def num_running(self) -> int:
        """Requests in the running batch (cheaper than stats())."""
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    # --- one iteration -----------------------------------------------------------------
    def step(self, now: float) -> StepResult:
        """Run one iteration starting at ``now``; the caller advances by .duration."""
        budget = self.profile.max_num_batched_tokens
        scheduled: list[tuple[_Seq, int]] = []
        preempted: list[str] = []
        budget = self._schedule_running(budget, scheduled, preempted)
        if not preempted:
            self._admit_waiting(budget, scheduled)
        return self._execute(now, scheduled, preempted)

    def _schedule_running(
        self, budget: int, scheduled: list[tuple[_Seq, int]], preempted: list[str]
    ) -> int:
        bs = self._bs
        kv = self._kv
        running = self._running
        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            n = seq.num_tokens - seq.num_computed
            if n > budget:
                n = budget
            need = (seq.num_computed + n + bs - 1) // bs - seq.num_blocks
            if need > 0:
                self_preempted = False
                while not kv.allocate(need):
                    victim = running.pop()
                    self._preempt(victim)
                    preempted.append(victim.rid)
                    if victim is seq:
                        self_preempted = True
                        break
                if self_preempted:
                    break
                seq.num_private += need
                seq.num_blocks += need
            scheduled.append((seq, n))
            budget -= n
            i += 1
        return budget

    def _preempt(self, seq: _Seq) -> None:
        self._kv.release(seq.cached_refs, seq.num_private)
        seq.cached_refs = []
        seq.num_private = seq.num_blocks = 0
        seq.num_computed = 0
        seq.reg = 0
        seq.preemptions += 1
        self._c.preemptions += 1
        self._waiting.appendleft(seq)

    def _admit_waiting(self, budget: int, scheduled: list[tuple[_Seq, int]]) -> None:
        bs = self._bs
        kv = self._kv
        waiting = self._waiting
        running = self._running
        max_seqs = self.profile.max_num_seqs
        c = self._c
        while waiting and budget > 0 and len(running) < max_seqs:
            seq = waiting[0]
            total = seq.num_tokens
            hashes = seq.hashes
            hit, idle, on_host = (
                kv.match_tiers(hashes, (total - 1) // bs) if hashes else (0, 0, 0)
            )
            start = hit * bs
            n = total - start
            if n > budget:
                n = budget
            need = (start + n + bs - 1) // bs - hit
            if need + on_host > kv.available() - idle:
                break
            waiting.popleft()
            loaded = kv.acquire_prefix(hashes, hit, need)
            self._loaded += loaded
            seq.cached_refs = list(hashes[:hit])
            seq.num_private = need
            seq.num_blocks = hit + need
            seq.reg = hit
            seq.num_computed = start
            if not seq.scheduled_once:
                seq.scheduled_once = True
                seq.cached_tokens = start
                seq.host_tokens = loaded * bs
                c.prefix_queries += total
                c.prefix_hits += start
                c.host_prefix_hits += loaded * bs
                c.prompt_tokens += seq.prompt_len
            running.append(seq)
            scheduled.append((seq, n))
            budget -= n

    def _execute(
        self, now: float, scheduled: list[tuple[_Seq, int]], preempted: list[str]
    ) -> StepResult:
        bs = self._bs
        kv = self._kv
        emitted: dict[str, int] = {}
        finished: list[FinishedRequest] = []
        num_tokens = 0
        ctx_sum = 0
        sq_sum = 0
        for seq, n in scheduled:
            done = seq.num_computed
            num_tokens += n
            if n == 1 and done >= seq.prompt_len:
                ctx_sum += done + 1
            else:
                sq_sum += n * n
            done += n
            seq.num_computed = done
            reg = seq.reg
            if reg < len(seq.hashes) and done // bs > reg:
                full = min(done // bs, len(seq.hashes))
                hashes = seq.hashes
                for j in range(reg, full):
                    if kv.promote(hashes[j]):
                        seq.cached_refs.append(hashes[j])
                        seq.num_private -= 1
                seq.reg = full
            if done == seq.num_tokens:
                seq.output += 1
                seq.num_tokens += 1
                emitted[seq.rid] = 1
                if seq.output >= seq.max_tokens:
                    finished.append(seq.finished(aborted=False))
        self._c.generation_tokens += len(emitted)
        if finished:
            self._retire(finished)
        p = self.profile
        duration = 0.0
        if num_tokens:
            duration = (
                max(p.t_floor_s, p.a_s_per_token * num_tokens)
                + p.b_s_per_ctx_token * ctx_sum
                + p.c_s_per_prefill_sq * sq_sum
            )
            if self._jitter > 0.0:
                duration *= max(0.0, self._rng.gauss(1.0, self._jitter))
            duration *= self.slowdown
        if self._loaded:
            duration += self._loaded * self._load_s_per_block
            self._loaded = 0
        return StepResult(now, duration, emitted, finished, preempted, num_tokens)

    def decode_until(
        self, now: float, horizon: float
    ) -> tuple[float, dict[str, int], list[tuple[FinishedRequest, float]]]:
        """Runs whole steps back to back from ``now`` while the batch only decodes and
        each step ends before ``horizon`` (the caller's next outside event): exactly
        the steps :meth:`step` would run, without building a result per step. Returns
        the time the last one ended (``now`` if none ran), the tokens emitted per
        request and each finished request with the end of its last step.

        Only when nothing waits, every running request is past its prompt (one token
        each), its prompt blocks are all offered to the prefix cache, the step's blocks
        are free or evictable (no preemption), no host blocks load, no jitter draws and
        no slowdown is injected (so the run is the same as step by step); else it runs
        nothing."""
        emitted: dict[str, int] = {}
        finished: list[tuple[FinishedRequest, float]] = []
        running = self._running
        p = self.profile
        if (self._waiting or not running or self._jitter > 0.0 or self._loaded
                or self.slowdown != 1.0 or len(running) > p.max_num_batched_tokens):
            return now, emitted, finished
        for seq in running:
            if (seq.num_tokens - seq.num_computed != 1 or seq.num_computed < seq.prompt_len
                    or seq.reg < len(seq.hashes)):
                return now, emitted, finished
        bs = self._bs
        kv = self._kv
        t_floor, a, b = p.t_floor_s, p.a_s_per_token, p.b_s_per_ctx_token
        t = now
        while running:
            # a run of steps up to the next finish: the batch is fixed, so only the
            # clock moves per step (the same sums as step by step); the blocks the run
            # needs are allocated at its end, all at once (allocation is by count, so
            # the same blocks are evicted), and only while they fit what is available
            n = len(running)
            ctx_sum = 0
            finish_in = 1 << 62
            for seq in running:
                ctx_sum += seq.num_computed + 1
                left = seq.max_tokens - seq.output
                if left < finish_in:
                    finish_in = left
            steps = finish_in
            avail = kv.available()
            if _growth(running, steps, bs) > avail:
                lo, hi = 0, steps - 1  # the most steps whose blocks fit
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if _growth(running, mid, bs) <= avail:
                        lo = mid
                    else:
                        hi = mid - 1
                steps = lo
            base = max(t_floor, a * n)
            k = 0
            while k < steps:
                dur = base + b * ctx_sum
                if t + dur >= horizon:
                    break
                t += dur
                ctx_sum += n
                k += 1
            if not k:
                break
            grow_total = 0
            done: list[FinishedRequest] = []
            for seq in running:
                computed = seq.num_computed + k
                grow = (computed + bs - 1) // bs - seq.num_blocks
                if grow > 0:
                    grow_total += grow
                    seq.num_private += grow
                    seq.num_blocks += grow
                seq.num_computed = computed
                seq.output += k
                seq.num_tokens += k
                emitted[seq.rid] = emitted.get(seq.rid, 0) + k
                if seq.output >= seq.max_tokens:
                    done.append(seq.finished(aborted=False))
            kv.allocate(grow_total)
            self._c.generation_tokens += n * k
            if done:
                self._retire(done)
                running = self._running
                finished.extend((f, t) for f in done)
            if k < finish_in:
                break  # the horizon, or the next step's blocks do not fit
        return t, emitted, finished

    def _retire(self, finished: list[FinishedRequest]) -> None:
        kv = self._kv
        seqs = self._seqs
        for fin in finished:
            seq = seqs.pop(fin.request_id)
            kv.release(seq.cached_refs, seq.num_private)
            seq.cached_refs = []
            seq.num_private = seq.num_blocks = 0
        self._running = [s for s in self._running if s.rid in seqs]

    # --- views -------------------------------------------------------------------------
    def stats(self) -> EngineStats:
        kv = self._kv
        c = self._c
        used = kv.num_used
        return EngineStats(
            num_running=len(self._running),
            num_waiting=len(self._waiting),
            kv_usage=used / kv.total,
            kv_blocks_used=used,
            kv_blocks_total=kv.total,
            prefix_queries=c.prefix_queries,
            prefix_hits=c.prefix_hits,
            preemptions_total=c.preemptions,
            prompt_tokens_total=c.prompt_tokens,
            generation_tokens_total=c.generation_tokens,
            kv_blocks_cached=kv.num_cached,
            host_prefix_hits=c.host_prefix_hits,
            host_kv_blocks_cached=kv.num_host,
            host_kv_blocks_total=kv.host_total,
            host_blocks_loaded_total=kv.host_loaded,
        )

    def cached_prefix_tokens(self, block_hashes: Sequence[int]) -> int:
        """Tokens of this prefix in the HBM cache now (no side effects)."""
        return self._kv.cached_prefix_blocks(block_hashes) * self._bs

    def tiered_prefix_tokens(self, block_hashes: Sequence[int]) -> int:
        """Tokens of this prefix in HBM or the host tier now (no side effects)."""
        return self._kv.tiered_prefix_blocks(block_hashes) * self._bs


def _growth(running: list[_Seq], steps: int, bs: int) -> int:
    """Blocks the running batch needs beyond what it holds to decode ``steps`` more
    tokens each."""
    need = 0
    for seq in running:
        grow = (seq.num_computed + steps + bs - 1) // bs - seq.num_blocks
        if grow > 0:
            need += grow
    return need
