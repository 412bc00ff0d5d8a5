"""Per-replica token capacity: the engine profile's step-time model, corrected online
from what saturated replicas actually delivered.

Demand and capacity are measured in engine-seconds per second ("work"): one replica
has 1.0 of it. A prompt token costs ``a + c * chunk`` (the batched-token cost and the
causal-attention cost of a chunk), an output token ``a + b * context`` (the
batched-token cost and reading its context's KV), the step-time model of
:mod:`tokenplane.engine.profiles` per token. A replica's token capacity for a given
prompt/output mix is then ``(P + O) / (P * s_prompt + O * s_output)`` tokens per
second.

Online correction: a replica with requests waiting inside its engine is saturated,
so what it delivered over the last interval (prompt and output tokens per second,
priced with the same model) is its real capacity in model units. ``factor`` is the
exponentially weighted mean of that figure over such observations (1.0 until the
first one), clamped to [0.5, 2]: below 1 the model was optimistic (a slower GPU,
longer contexts than assumed), above 1 pessimistic. An interval in which a replica
delivered under a quarter of a replica's work is no evidence (a queue that formed
at its end).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.engine.profiles import EngineProfile


@dataclass(frozen=True, slots=True)
class TokenCosts:
    """Engine-seconds per prompt token and per output token."""

    prompt_s: float
    output_s: float

    def work(self, prompt_tokens_per_s: float, output_tokens_per_s: float) -> float:
        """Engine-seconds per second the given token rates need."""
        return prompt_tokens_per_s * self.prompt_s + output_tokens_per_s * self.output_s

    def tokens_per_s(self, prompt_share: float) -> float:
        """Tokens per second one replica delivers at full utilisation, for a mix with
        ``prompt_share`` of its tokens prompt tokens."""
        per_token = prompt_share * self.prompt_s + (1.0 - prompt_share) * self.output_s
        return 1.0 / per_token if per_token > 0 else float("inf")


def profile_costs(profile: EngineProfile, mean_prompt: float = 1024.0,
                  mean_output: float = 256.0) -> TokenCosts:
    """Per-token costs from the profile's step-time constants for requests of
    ``mean_prompt`` prompt and ``mean_output`` output tokens (a decode token reads a
    context of the prompt plus half the output, on average)."""
    chunk = min(mean_prompt, float(profile.max_num_batched_tokens))
    prompt_s = profile.a_s_per_token + profile.c_s_per_prefill_sq * chunk
    output_s = profile.a_s_per_token + profile.b_s_per_ctx_token * (mean_prompt
                                                                    + mean_output / 2)
    return TokenCosts(prompt_s=prompt_s, output_s=output_s)


def flat_costs(tokens_per_s: float) -> TokenCosts:
    """Every token the same cost: a configured capacity in tokens per second."""
    if tokens_per_s <= 0:
        raise ValueError("tokens_per_s must be > 0")
    return TokenCosts(prompt_s=1.0 / tokens_per_s, output_s=1.0 / tokens_per_s)


class CapacityEstimator:
    """The modelled per-token costs and the online correction of a replica's
    capacity (``factor``: engine-seconds one replica really delivers per second, in
    model units)."""

    def __init__(self, costs: TokenCosts, alpha: float = 0.05, lo: float = 0.5,
                 hi: float = 2.0) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError("alpha must be in (0, 1]")
        self.costs = costs
        self.alpha = alpha
        self.lo = lo
        self.hi = hi
        self.factor = 1.0
        self.observations = 0

    def observe_saturated(self, prompt_tokens_per_s: float,
                          output_tokens_per_s: float) -> None:
        """One saturated replica delivered these token rates over the last interval."""
        delivered = self.costs.work(prompt_tokens_per_s, output_tokens_per_s)
        if delivered < self.lo * 0.5:
            return  # a queue that formed in the interval's last instant: no evidence
        delivered = min(self.hi, max(self.lo, delivered))
        self.factor += self.alpha * (delivered - self.factor)
        self.observations += 1

    def replicas_for(self, work: float, utilisation: float) -> float:
        """Replicas (fractional) that run ``work`` engine-seconds per second at
        ``utilisation`` of their corrected capacity."""
        return work / (self.factor * utilisation)

    def replica_tokens_per_s(self, prompt_share: float) -> float:
        """Corrected tokens per second of one replica for the given mix."""
        return self.factor * self.costs.tokens_per_s(prompt_share)
