"""Admission through a real gateway and the official openai client: 429s with the
right code and headers, x-ratelimit headers on every answer, the hierarchy, a stream
cut by its budget, max_tokens clamping and budget alerts."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web

from tests.gateway.harness import GatewayThread, free_port, sim_config
from tokenplane.admission import Scope
from tokenplane.meta.limit_store import LimitTarget

MODEL = "sim-llama3-8b"
MESSAGES: list[Any] = [{"role": "user", "content": "Name three prime numbers."}]


def _config(**admission: Any) -> dict[str, Any]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "limits_reload_s": 0, **admission}
    return cfg


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    g = GatewayThread(_config(), Path(tmp_path_factory.mktemp("adm"))).start()
    yield g
    g.stop()


def _client(gw: GatewayThread, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)


def _limit(gw: GatewayThread, target: LimitTarget, **limits: Any) -> None:
    svc = gw.gateway.admission
    assert svc is not None
    svc.limits.set(target, limits)


def _prompt_tokens(gw: GatewayThread) -> int:
    return len(gw.gateway.counters.prompt_ids(MODEL).messages(MESSAGES, None))


def _spent(gw: GatewayThread, tenant: str, scope: Scope, name: str) -> int:
    svc = gw.gateway.admission
    assert svc is not None
    statuses = gw.call(svc.admission.status(tenant, scope, svc.now()))
    return next(s.spent for s in statuses if s.limit_name == name)


def test_success_answers_carry_ratelimit_headers(gw: GatewayThread) -> None:
    _limit(gw, LimitTarget("hdr"), rpm=100, tpm=100_000)
    client = _client(gw, gw.create_key("hdr", app="a"))
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, max_tokens=5)
    h = raw.headers
    assert h["x-ratelimit-limit-requests"] == "100"
    assert h["x-ratelimit-remaining-requests"] == "99"
    assert h["x-ratelimit-limit-tokens"] == "100000"
    assert int(h["x-ratelimit-remaining-tokens"]) == 100_000 - _prompt_tokens(gw) - 5
    assert h["x-ratelimit-reset-requests"].endswith("s")
    stream = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, max_tokens=5, stream=True)
    assert stream.headers["x-ratelimit-remaining-requests"] == "98"
    assert stream.headers["content-type"].startswith("text/event-stream")
    list(stream.parse())
    client.close()


def test_rate_limit_refusal_is_a_429_with_headers(gw: GatewayThread) -> None:
    key = gw.create_key("rl", app="a")
    key_id = gw.gateway.keys.authenticate(key).key_id  # type: ignore[union-attr]
    _limit(gw, LimitTarget("rl", key_id=key_id), rpm=2)
    client = _client(gw, key)
    for _ in range(2):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    err = info.value
    assert err.status_code == 429 and err.code == "rate_limit_exceeded"
    assert f"key:{key_id}" in err.message and "rpm" in err.message
    h = err.response.headers
    assert 1 <= int(h["retry-after"]) <= 60
    assert h["x-ratelimit-limit-requests"] == "2"
    assert h["x-ratelimit-remaining-requests"] == "0"
    # another key of the same tenant is not limited by that key's rpm
    other = _client(gw, gw.create_key("rl", app="a"))
    other.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    client.close()
    other.close()


def test_money_budget_refusal_has_its_own_code(gw: GatewayThread) -> None:
    # prices: input 0.10 / output 0.40 per 1M tokens -> about 2 micros + 0.4 per output token
    _limit(gw, LimitTarget("money"), budget_micros=40, budget_period="daily")
    client = _client(gw, gw.create_key("money", app="a"))
    served = 0
    with pytest.raises(openai.RateLimitError) as info:
        for _ in range(20):
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=20)
            served += 1
    assert served >= 1
    err = info.value
    assert err.code == "budget_exceeded"
    # in the currency, not in micros
    assert "- Budget 0.000040 USD/day for tenant money reached: 0.00 USD remaining." in \
        err.message
    assert int(err.response.headers["retry-after"]) >= 1
    assert "x-ratelimit-limit-requests" not in err.response.headers
    # when it resets, as a date and a duration (issue 31), not seconds to wait
    resets = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    assert re.search(rf"It resets {resets} 00:00 UTC \(in (\d+ h )?\d+ min\)\.$",
                     err.message) or re.search(
        rf"It resets {resets} 00:00 UTC \(in \d+ (h|s)\)\.$", err.message), err.message
    assert "Retry after" not in err.message
    # the same x-ratelimit-* headers as a rate limit's, money in the currency
    h = err.response.headers
    assert (h["x-ratelimit-limit-budget"], h["x-ratelimit-remaining-budget"]) == \
        ("0.000040", "0.00")
    assert re.fullmatch(r"(\d+h)?(\d+m)?\d+s", h["x-ratelimit-reset-budget"])
    assert _spent(gw, "money", Scope("tenant", "money"), "budget") <= 40
    client.close()


def test_department_budget_stops_all_its_apps_only(gw: GatewayThread) -> None:
    prompt = _prompt_tokens(gw)
    _limit(gw, LimitTarget("org", department="eng"), tokens_per_day=3 * (prompt + 10))
    eng_a = _client(gw, gw.create_key("org", department="eng", app="a"))
    eng_b = _client(gw, gw.create_key("org", department="eng", app="b"))
    sales = _client(gw, gw.create_key("org", department="sales", app="a"))
    for _ in range(3):
        eng_a.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10)
    for client in (eng_a, eng_b):
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10)
        assert info.value.code == "budget_exceeded"
        assert "department:org/eng" in info.value.message
        h = info.value.response.headers
        assert h["x-ratelimit-limit-tokens"] == str(3 * (prompt + 10))
        assert h["x-ratelimit-remaining-tokens"] == "0"
        assert "It resets " in info.value.message
    for _ in range(4):  # the other department is not affected
        sales.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10)
    assert _spent(gw, "org", Scope("department", "org/eng"), "tokens_per_day") == \
        3 * (prompt + 10)
    for c in (eng_a, eng_b, sales):
        c.close()


def test_model_limit_applies_to_that_model_only(gw: GatewayThread) -> None:
    _limit(gw, LimitTarget("mdl", model="other-model"), rpm=0)
    client = _client(gw, gw.create_key("mdl", app="a"))
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    _limit(gw, LimitTarget("mdl", model=MODEL), rpm=0)
    with pytest.raises(openai.BadRequestError) as info:  # a limit of 0: never passes
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    assert info.value.code == "request_exceeds_limit"
    assert f"tenant mdl (model {MODEL})" in info.value.message
    client.close()


def test_request_that_can_never_fit_is_a_400_without_retry(gw: GatewayThread) -> None:
    """Item 17: a request larger than a limit itself is refused for good (400
    ``request_exceeds_limit``, naming the limit and the scope, no retry-after), not
    told to retry in a second; one that fits the same limit is served."""
    prompt = _prompt_tokens(gw)
    _limit(gw, LimitTarget("never"), tpm=prompt + 5)  # the reservation: prompt + 8
    client = _client(gw, gw.create_key("never", app="a"))
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=20)
    err = info.value
    assert (err.status_code, err.code, err.type) == (400, "request_exceeds_limit",
                                                     "invalid_request_error")
    assert "retry-after" not in err.response.headers
    assert "x-request-id" in err.response.headers
    assert err.message.endswith(
        "This request can never pass the limit 'tpm' of tenant never: it needs "
        f"{prompt + 8} total_tokens at once and the limit allows {prompt + 5} total_tokens "
        "per minute. Lower max_tokens or shorten the input.")
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)  # fits
    # a prompt larger than the day's tokens
    _limit(gw, LimitTarget("never", app="a"), tokens_per_day=prompt - 1)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    assert info.value.code == "request_exceeds_limit"
    assert "'tokens_per_day' of app never//a" in info.value.message
    assert "per day" in info.value.message
    # a request that costs more than the whole budget, in the currency
    _limit(gw, LimitTarget("never", app="a"), tokens_per_day=None, budget_micros=1,
           budget_period="monthly")
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    assert "the limit allows 0.000001 USD per month" in info.value.message
    client.close()


def test_stream_cut_by_budget_ends_well_formed(gw: GatewayThread) -> None:
    prompt = _prompt_tokens(gw)
    allowed_output = 40  # reserved 8, then debits of 16: 24, 40, and the next is refused
    limit = prompt + allowed_output
    _limit(gw, LimitTarget("cut"), tokens_per_day=limit)
    client = _client(gw, gw.create_key("cut", app="a"))
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=300, stream=True))
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == allowed_output  # nothing beyond what was granted
    last = chunks[-1]
    assert last.choices[0].finish_reason == "length"
    note = (last.model_extra or {}).get("tokenplane")
    assert note is not None and note["stopped_by"] == "budget"
    assert note["code"] == "budget_exceeded"
    spent = _spent(gw, "cut", Scope("tenant", "cut"), "tokens_per_day")
    assert limit <= spent <= limit + 16  # billed what was generated; within the bound
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)
    client.close()


def test_completions_stream_cut_by_budget(gw: GatewayThread) -> None:
    _limit(gw, LimitTarget("cutc"), tpm=60, tpm_unit="output_tokens")
    client = _client(gw, gw.create_key("cutc", app="a"))
    chunks = list(client.completions.create(model=MODEL, prompt="Once upon a time",
                                            max_tokens=300, stream=True))
    texts = [c for c in chunks if c.choices and c.choices[0].text]
    assert len(texts) == 56  # 8 reserved + 3 debits of 16; the 4th would pass 60
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].model_extra["tokenplane"]["code"] == "rate_limit_exceeded"
    client.close()


class _Webhook:
    """A tiny HTTP server on the gateway's loop that collects posted alerts."""

    def __init__(self) -> None:
        self.port = free_port()
        self.posts: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.got: asyncio.Event | None = None

    async def start(self) -> None:
        self.got = asyncio.Event()

        async def hook(request: web.Request) -> web.Response:
            self.posts.append(await request.json())
            assert self.got is not None
            self.got.set()
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_post("/hook", hook)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def wait(self, n: int) -> None:
        assert self.got is not None
        while len(self.posts) < n:
            self.got.clear()
            await asyncio.wait_for(self.got.wait(), 10)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def test_clamp_and_budget_alerts(tmp_path: Path) -> None:
    hook = _Webhook()
    port = hook.port
    g = GatewayThread(_config(clamp_max_tokens=True,
                              alert_webhook=f"http://127.0.0.1:{port}/hook"), tmp_path).start()
    try:
        g.call(hook.start())
        prompt = _prompt_tokens(g)
        limit = 4 * prompt + 240
        _limit(g, LimitTarget("clamp"), tokens_per_day=limit)
        client = _client(g, g.create_key("clamp", app="a"))
        first = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=60)
        assert first.usage is not None and first.usage.completion_tokens == 60
        # a request alone is given at most half of what is left (the rest is kept for
        # whoever comes next): max_tokens 500 is lowered to that, not refused
        left = limit - (prompt + 60) - prompt
        second = client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                max_tokens=500)
        assert second.usage is not None and second.usage.completion_tokens == left // 2
        assert second.choices[0].finish_reason == "length"
        left -= left // 2 + prompt
        third = client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                               max_tokens=500)
        assert third.usage is not None and third.usage.completion_tokens == left // 2
        g.call(hook.wait(2))
        # 3 prompts + 60 + 105 + 45 of 300 (85% with its 15-token prompt): 50% and 80%
        assert sorted(p["threshold_pct"] for p in hook.posts) == [50, 80]
        assert all(p["tenant"] == "clamp" and p["limit_name"] == "tokens_per_day"
                   for p in hook.posts)
        text = g.gateway.metrics.render().decode()
        assert 'tokenplane_budget_alerts_total{limit="tokens_per_day",scope="tenant",' \
               'tenant="clamp",threshold="80"} 1.0' in text
        assert 'tokenplane_max_tokens_clamped_total{tenant="clamp"} 2.0' in text
        client.close()
    finally:
        g.call(hook.stop())
        g.stop()


def test_concurrency_limit_refuses_while_a_stream_runs(tmp_path: Path) -> None:
    cfg = _config()
    cfg["models"][0]["backends"][0]["profile"] = "llama3-8b-a100"  # ~10 ms per token
    g = GatewayThread(cfg, tmp_path).start()
    try:
        _limit(g, LimitTarget("conc1"), max_concurrent=1)
        client = _client(g, g.create_key("conc1", app="a"))
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                max_tokens=100, stream=True)
        first = next(stream)  # the stream holds the only slot until it ends
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
        assert info.value.code == "concurrency_limit_exceeded"
        assert info.value.response.headers["retry-after"] == "1"
        rest = list(stream)
        assert [first, *rest][-1].choices[0].finish_reason == "length"
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
        client.close()
    finally:
        g.stop()
