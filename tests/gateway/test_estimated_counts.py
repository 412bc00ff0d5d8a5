"""An alias with no usable tokenizer is counted by the estimator, flagged as estimated,
and the estimator is calibrated from the upstream's reported prompt counts."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.compose.config_file import validate_config
from tokenplane.operations.chat import CHAT
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.tokens.registry import UnknownTokenizerError

MODEL = "sim-llama3-8b"
WORDS = ["the", "invoice", "ledger", "records", "every", "token", "that", "a", "tenant",
         "spends", "on", "each", "model", "request", "and", "the", "finance", "team",
         "reconciles", "totals", "at", "month", "end"]


@pytest.mark.parametrize(("spec", "estimated"), [
    ("estimate", True), ("my-private-model-7b", True), ("mistral-large-2411", True),
    ("gpt-4o", False), ("cl100k_base", False),
])
def test_unknown_tokenizers_fall_back_to_the_estimator(spec: str, estimated: bool) -> None:
    cfg = validate_config(sim_config(tokenizer=spec))
    counters = ModelCounters(cfg.models)
    assert counters.is_estimated(MODEL) is estimated
    result = counters.count(cfg.models[0], CHAT, {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]})
    assert result.counts.prompt > 0 and result.counts.system > 0
    assert ("input_estimated" in result.flags) is estimated


def test_a_spec_that_cannot_be_loaded_is_refused() -> None:
    """A spec (kind:arg) is not a model name: one that cannot be loaded is a mistake in
    the config (`config check` and `serve` name it), not a reason to estimate."""
    cfg = validate_config(sim_config(tokenizer="hf:/nonexistent/tokenizer.json"))
    with pytest.raises(UnknownTokenizerError):
        ModelCounters(cfg.models)


def test_estimated_alias_is_flagged_and_calibrated(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1, tokenizer="estimate"), tmp_path).start()
    key = gw.create_key("acme", app="est")
    rng = random.Random(7)
    n = 150

    async def run() -> None:
        client = AsyncOpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
        for _ in range(n):
            text = " ".join(rng.choices(WORDS, k=rng.randint(20, 200)))
            await client.chat.completions.create(
                model=MODEL, max_tokens=2, messages=[
                    {"role": "system", "content": "You are a ledger assistant."},
                    {"role": "user", "content": text}])
        await client.close()

    asyncio.run(run())
    text = httpx.get(gw.metrics_url, timeout=10).text
    metrics: dict[str, Any] = {
        s.name: (s.labels, s.value) for fam in text_string_to_metric_families(text)
        for s in fam.samples if s.name.startswith("tokenplane_estimator_error_ratio")}
    stats = gw.gateway.counters.estimator.error_stats(MODEL)
    gw.stop()
    rows = sorted(gw.ledger_rows(), key=lambda r: r["ts"])
    assert len(rows) == n
    assert all("input_estimated" in r["flags"] for r in rows)
    assert all(r["usage_source"] == "upstream" for r in rows)
    errors = [abs(r["estimated_input_tokens"] - r["input_tokens"]) / r["input_tokens"]
              for r in rows]
    early, late = sum(errors[:20]) / 20, sum(errors[-50:]) / 50
    assert late < early and late < 0.03, (early, late)
    assert metrics["tokenplane_estimator_error_ratio"] == ({"model": MODEL},
                                                           pytest.approx(stats.mean_abs_rel))
    assert metrics["tokenplane_estimator_error_ratio_samples"][1] == stats.samples == n
