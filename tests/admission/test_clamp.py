"""``clamp_max_tokens`` through a real gateway (issue 33, finding 2): a request without
``max_tokens`` under a large budget is clamped within the model's window (it used to
go out asking for the whole budget and get the upstream's 400), and concurrent
requests share what is left instead of each being given all of it: the tokens billed
in the window stay within the limit (the bound of docs/ADMISSION.md with the clamp:
every clamped request reserves its whole cap, so it can use no more than granted)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.admission import Scope
from tokenplane.meta.limit_store import LimitTarget

MODEL = "sim-llama3-8b"
WINDOW = 1024
MESSAGES: list[Any] = [{"role": "user", "content": "Write about tokens."}]


def _gateway(tmp_path: Path) -> GatewayThread:
    cfg = sim_config(replicas=2, profile="instant", context_window=WINDOW)
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "limits_reload_s": 0, "clamp_max_tokens": True}
    return GatewayThread(cfg, tmp_path).start()


def _spent(g: GatewayThread, tenant: str, name: str) -> tuple[int, int]:
    svc = g.gateway.admission
    assert svc is not None
    status = g.call(svc.admission.status(tenant, Scope("tenant", tenant), svc.now()))
    st = next(s for s in status if s.limit_name == name)
    return st.spent, st.reserved


def test_clamp_keeps_a_request_without_max_tokens_within_the_window(tmp_path: Path) -> None:
    g = _gateway(tmp_path)
    try:
        g.gateway.admission.limits.set(  # type: ignore[union-attr]
            LimitTarget("wide"), {"tokens_per_day": 100_000})
        client = openai.OpenAI(base_url=g.base_url, api_key=g.create_key("wide", app="a"),
                               max_retries=0)
        out = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        assert out.usage is not None
        prompt = out.usage.prompt_tokens
        # the window's room, not the budget's 100,000 less the prompt
        assert out.usage.completion_tokens == WINDOW - prompt
        assert out.choices[0].finish_reason == "length"
        spent, reserved = _spent(g, "wide", "tokens_per_day")
        assert (spent, reserved) == (WINDOW, 0)
        client.close()
    finally:
        g.stop()


def test_concurrent_clamped_requests_share_the_limit(tmp_path: Path) -> None:
    g = _gateway(tmp_path)
    limit = 3000
    try:
        g.gateway.admission.limits.set(  # type: ignore[union-attr]
            LimitTarget("share"), {"tpm": limit})
        key = g.create_key("share", app="a")

        def one(i: int) -> tuple[str, int]:
            client = openai.OpenAI(base_url=g.base_url, api_key=key, max_retries=0)
            try:
                if i % 2:
                    stream = client.chat.completions.create(
                        model=MODEL, messages=MESSAGES, stream=True,
                        stream_options={"include_usage": True})
                    usage = [c.usage for c in stream if c.usage is not None]
                    return "ok", usage[0].total_tokens
                out = client.chat.completions.create(
                    model=MODEL, messages=MESSAGES, max_tokens=None if i % 4 else 900)
                assert out.usage is not None
                return "ok", out.usage.total_tokens
            except openai.RateLimitError:
                return "429", 0
            finally:
                client.close()

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(one, range(16)))
        served = [t for s, t in results if s == "ok"]
        assert len(served) >= 4, results  # shared, not all to the first
        spent, reserved = _spent(g, "share", "tpm")
        assert reserved == 0
        assert spent == sum(served) <= limit, results
    finally:
        g.stop()
