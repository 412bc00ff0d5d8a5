"""Named performance profiles for the simulated engine, with their sources.

A profile carries the constants of the step-time model

    T = max(t_floor, a * N) + b * sum(decode context lengths) + c * sum(prefill chunk^2)

(N = tokens batched in the step) and the size of the paged KV cache, derived from
the model's shape:

    KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x dtype_bytes
    capacity (tokens)  = (gpu_memory x utilisation - weights) / KV bytes per token

Sources of the numbers (quoted in each profile's ``source``):

* ``a`` and ``t_floor``: vidur's published profiling data (microsoft/vidur,
  ``data/profiling/compute/{a100,h100}/.../mlp.csv`` and ``attention.csv``), per-
  operator medians summed over the model's layers; attention kernel, LM head and CPU
  overhead not included. Llama-3-8B on A100: ~67 us per batched token above a
  ~10 ms floor. Llama-2-7B on H100 (the closest shape vidur profiles on H100):
  ~20 us per token above ~5.5 ms; used for Llama-3-8B on H100.
* ``b`` (decode attention per context token): a memory-bound roofline, reading the
  KV of one token (128 KiB for Llama-3-8B in fp16) at the HBM bandwidth (A100-80GB
  2.0 TB/s, H100-SXM 3.35 TB/s; NVIDIA data sheets).
* ``c`` (prefill attention per chunk^2): causal attention FLOPs
  2 x layers x (heads x head_dim) x chunk^2 at half the dense fp16 peak (A100 312
  TFLOPS, H100 989 TFLOPS; NVIDIA data sheets).
* Llama-3-8B shape (32 layers, 8 KV heads, head_dim 128, 8.03 B parameters): Meta's
  ``config.json`` for meta-llama/Meta-Llama-3-8B.

Second KV tier (``host_kv_gib`` > 0, off by default): host DRAM that takes the
blocks evicted from HBM, as vLLM's CPU KV offloading, LMCache and Mooncake's
DRAM pool run it; a prefix hit there costs a copy of ``kv_bytes_per_block`` at
``host_link_gbps`` (GB/s) instead of recompute.

``cold_start_s`` (Llama-3-8B profiles: 120 s): weights (~15 GiB fp16) loaded from
network storage at ~0.5 GB/s plus engine start-up and CUDA-graph capture; the AWS
EKS guide to autoscaling LLM inference quotes 2-10 minutes of model load plus
warm-up (docs.aws.amazon.com, ml-inference-autoscaling; awslabs accelerated-compute
tutorials, "vLLM Production Monitoring & Scaling"). The low end: weights cached on
the node. ``llama3-8b-a100-offload``: NVIDIA
DGX A100 640GB has 2 TB of system memory for 8 A100-80GB GPUs (NVIDIA DGX A100
data sheet), 256 GiB per GPU; 224 GiB of it hold KV, leaving 32 GiB per GPU for the
OS and the serving process. Link: PCIe Gen4 x16, 32 GB/s per direction
(64 GB/s bidirectional, NVIDIA A100 data sheet); ~25 GB/s is what pinned
host-to-device copies achieve in practice (CUDA ``bandwidthTest``), so 25 GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GIB = 1024**3


@dataclass(frozen=True)
class EngineProfile:
    """Step-time constants and KV-cache size of one (model, GPU) pair."""

    name: str
    source: str
    t_floor_s: float
    a_s_per_token: float
    b_s_per_ctx_token: float
    c_s_per_prefill_sq: float
    kv_capacity_blocks: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    # How kv_capacity_blocks was derived (0 when not derived from a model shape).
    layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    dtype_bytes: int = 0
    gpu_mem_gib: float = 0.0
    weights_gib: float = 0.0
    utilisation: float = 0.0
    # Second KV tier in host DRAM (0 = off) and the host-to-GPU link, in GB/s (1e9 B/s).
    host_kv_gib: float = 0.0
    host_link_gbps: float = 25.0
    # Seconds from "start a replica" to its first served request (0: not modelled):
    # the autoscaling simulator's cold start
    cold_start_s: float = 0.0

    def __post_init__(self) -> None:
        if self.block_size < 1 or self.kv_capacity_blocks < 1:
            raise ValueError("block_size and kv_capacity_blocks must be >= 1")
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be >= 1")
        if min(self.t_floor_s, self.a_s_per_token, self.b_s_per_ctx_token,
               self.c_s_per_prefill_sq) < 0:
            raise ValueError("step-time constants must be >= 0")
        if self.host_kv_gib < 0 or self.host_link_gbps <= 0:
            raise ValueError("host_kv_gib must be >= 0 and host_link_gbps > 0")
        if self.host_kv_gib > 0 and self.kv_bytes_per_block == 0:
            raise ValueError("a host KV tier needs the model shape (layers, kv_heads, ...)")

    @property
    def kv_capacity_tokens(self) -> int:
        return self.kv_capacity_blocks * self.block_size

    @property
    def kv_bytes_per_block(self) -> int:
        """Bytes of one KV block (0 when the model shape is not given)."""
        per_token = kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim,
                                       self.dtype_bytes)
        return per_token * self.block_size

    @property
    def host_kv_blocks(self) -> int:
        """Blocks the host-DRAM tier holds (0 = no second tier)."""
        if self.host_kv_gib <= 0:
            return 0
        return int(self.host_kv_gib * GIB // self.kv_bytes_per_block)

    @property
    def host_load_s_per_block(self) -> float:
        """Seconds to copy one block from host DRAM to HBM over the link."""
        return self.kv_bytes_per_block / (self.host_link_gbps * 1e9)

    def prefill_alone_s(self, tokens: int) -> float:
        """A lower bound on how long ``tokens`` prompt tokens take to prefill on an
        idle replica: their chunks' steps (``max_num_batched_tokens`` each), the
        context reads of the later chunks left out."""
        out = 0.0
        left = max(0, tokens)
        while left > 0:
            c = min(left, self.max_num_batched_tokens)
            out += max(self.t_floor_s, self.a_s_per_token * c) + self.c_s_per_prefill_sq * c * c
            left -= c
        return out


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of K and V cached for one token across all layers."""
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def kv_capacity_blocks(
    *,
    gpu_mem_gib: float,
    utilisation: float,
    weights_gib: float,
    layers: int,
    kv_heads: int,
    head_dim: int,
    dtype_bytes: int,
    block_size: int = 16,
) -> int:
    """KV-cache blocks left after the weights, vLLM-style (gpu_memory_utilization)."""
    free = gpu_mem_gib * utilisation * GIB - weights_gib * GIB
    per_token = kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)
    return max(1, int(free // per_token) // block_size)


_LLAMA3_8B_WEIGHTS_GIB = 8.03e9 * 2 / GIB  # fp16 weights, ~14.96 GiB
_LLAMA3_8B_SHAPE = {"layers": 32, "kv_heads": 8, "head_dim": 128, "dtype_bytes": 2}
_LLAMA3_8B_KV_BYTES = kv_bytes_per_token(32, 8, 128, 2)  # 131072 B = 128 KiB
# Cold start of a Llama-3-8B replica: ~15 GiB of fp16 weights read from network
# storage at ~0.5 GB/s (~32 s), plus container start, engine init, CUDA-graph capture
# and warm-up (~60-90 s for an 8B model in vLLM); the AWS EKS inference guide quotes
# "model load takes 2-10 minutes + CUDA warmup" for LLM pods: 120 s, its low end.
LLAMA3_8B_COLD_START_S = 120.0
_LLAMA3_8B_ATTN_FLOPS_PER_SQ = 2 * 32 * 4096  # causal: 4*L*d*n^2 / 2


def _llama3_8b(name: str, gpu: str, t_floor: float, a: float, hbm_bps: float,
               peak_flops: float, source_ta: str) -> EngineProfile:
    blocks = kv_capacity_blocks(
        gpu_mem_gib=80.0, utilisation=0.9, weights_gib=_LLAMA3_8B_WEIGHTS_GIB,
        **_LLAMA3_8B_SHAPE,
    )
    source = (
        f"Llama-3-8B fp16 on {gpu}-80GB. t_floor and a: {source_ta}. "
        f"b: KV read roofline, {_LLAMA3_8B_KV_BYTES} B/token at {hbm_bps / 1e12:.2f} TB/s. "
        f"c: causal attention FLOPs at 50% of {peak_flops / 1e12:.0f} TFLOPS. "
        "KV capacity: (80 GiB x 0.9 - 14.96 GiB weights) / 128 KiB per token."
    )
    return EngineProfile(
        name=name,
        source=source,
        t_floor_s=t_floor,
        a_s_per_token=a,
        b_s_per_ctx_token=_LLAMA3_8B_KV_BYTES / hbm_bps,
        c_s_per_prefill_sq=_LLAMA3_8B_ATTN_FLOPS_PER_SQ / (0.5 * peak_flops),
        kv_capacity_blocks=blocks,
        gpu_mem_gib=80.0,
        weights_gib=_LLAMA3_8B_WEIGHTS_GIB,
        utilisation=0.9,
        cold_start_s=LLAMA3_8B_COLD_START_S,
        **_LLAMA3_8B_SHAPE,
    )


def _build() -> dict[str, EngineProfile]:
    a100 = _llama3_8b(
        "llama3-8b-a100", "A100", 0.010, 67e-6, 2.0e12, 312e12,
        "vidur profiling data (microsoft/vidur data/profiling/compute/a100), per-operator "
        "medians summed over 32 layers: ~67 us per batched token above a ~10 ms floor",
    )
    h100 = _llama3_8b(
        "llama3-8b-h100", "H100", 0.0055, 20e-6, 3.35e12, 989e12,
        "vidur profiling data (microsoft/vidur data/profiling/compute/h100) for Llama-2-7B, "
        "the closest profiled shape: ~20 us per batched token above ~5.5 ms",
    )
    offload = replace(
        a100,
        name="llama3-8b-a100-offload",
        source=a100.source + (
            " Host KV tier: 224 GiB of DRAM per GPU (DGX A100 640GB: 2 TB for 8 GPUs, "
            "NVIDIA data sheet; 32 GiB per GPU left to the OS and server), loaded over "
            "PCIe Gen4 x16 at 25 GB/s (32 GB/s per direction peak, A100 data sheet)."
        ),
        host_kv_gib=224.0,
        host_link_gbps=25.0,
    )
    instant = EngineProfile(
        name="instant",
        source="No GPU model: zero step time, for benchmarks of the code around the engine.",
        t_floor_s=0.0,
        a_s_per_token=0.0,
        b_s_per_ctx_token=0.0,
        c_s_per_prefill_sq=0.0,
        kv_capacity_blocks=a100.kv_capacity_blocks,
    )
    return {p.name: p for p in (a100, h100, offload, instant)}


def profile_names() -> list[str]:
    """Names accepted by get_profile()."""
    return sorted(_build())


def get_profile(name: str) -> EngineProfile:
    """The named profile; KeyError listing the known names otherwise."""
    profiles = _build()
    try:
        return profiles[name]
    except KeyError:
        known = ", ".join(sorted(profiles))
        raise KeyError(f"unknown engine profile {name!r}; known profiles: {known}") from None
