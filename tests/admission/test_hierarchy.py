"""A request satisfies every scope above it; refusals name only the caller's scope."""

from __future__ import annotations

from datetime import UTC, datetime

from tokenplane.admission import (
    Admission,
    Amounts,
    CounterStore,
    Denial,
    Grant,
    LimitTable,
    Parties,
    Scope,
    ScopeLimits,
)

NOW = 1_700_000_000.0


def _table() -> LimitTable:
    return LimitTable({
        Scope("tenant", "acme"): ScopeLimits(tpm=100_000, budget_micros=10_000_000),
        Scope("department", "eng"): ScopeLimits(budget_micros=1_000),
        Scope("app", "bot", "gpt-x"): ScopeLimits(rpm=2),
    })


async def test_department_budget_stops_all_its_apps_only(store: CounterStore) -> None:
    adm = Admission(_table(), store)
    bot = Parties("acme", department="eng", app="bot", key="kb").scope_chain("m")
    etl = Parties("acme", department="eng", app="etl", key="ke").scope_chain("m")
    rep = Parties("acme", department="ops", app="rep", key="kr").scope_chain("m")
    spend = await adm.reserve(bot, Amounts(1, 100, 100, 1_000), NOW)
    assert isinstance(spend, Grant)
    for chain in (bot, etl):
        refused = await adm.reserve(chain, Amounts(1, 10, 10, 1), NOW + 1)
        assert isinstance(refused, Denial)
        assert refused.scope == Scope("department", "eng")
        assert (refused.code, refused.limit_name, refused.limit) == (
            "budget_exceeded", "budget", 1_000)
        assert "acme" not in refused.message
        # money in the currency, not in micros
        assert refused.describe("USD") == (
            "Budget 0.001000 USD/month for department eng reached: 0.00 USD remaining. "
            "Retry in 16 days.")
        # with the time: when the month's budget resets (issue 31), not seconds
        assert refused.retry_after_s is not None
        resets = datetime.fromtimestamp(NOW + 1 + refused.retry_after_s, UTC)
        assert (resets.day, resets.hour, resets.minute) == (1, 0, 0)
        assert refused.describe("USD", NOW + 1).endswith(
            f"reached: 0.00 USD remaining. It resets {resets:%Y-%m-%d} 00:00 UTC (in 16 days).")
    other = await adm.reserve(rep, Amounts(1, 10, 10, 500), NOW + 1)
    assert isinstance(other, Grant)
    # All-or-nothing: the refused requests left nothing behind at the tenant.
    tenant = {s.limit_name: s for s in await adm.status("acme", Scope("tenant", "acme"),
                                                        NOW + 2)}
    assert tenant["tpm"].spent == 200 + 20
    assert tenant["budget"].reserved == 1_500


async def test_model_specific_limit_applies_to_that_model_only(store: CounterStore) -> None:
    adm = Admission(_table(), store)
    who = Parties("acme", department="ops", app="bot")
    for i in range(2):
        assert isinstance(await adm.reserve(who.scope_chain("gpt-x"), Amounts(1), NOW + i),
                          Grant)
    refused = await adm.reserve(who.scope_chain("gpt-x"), Amounts(1), NOW + 10)
    assert isinstance(refused, Denial) and refused.scope == Scope("app", "bot", "gpt-x")
    assert refused.code == "rate_limit_exceeded"
    assert refused.retry_after_s == 50.0
    assert isinstance(await adm.reserve(who.scope_chain("other"), Amounts(1), NOW + 10), Grant)


async def test_allowed_tokens_clamps_to_the_tightest_scope(store: CounterStore) -> None:
    table = LimitTable({
        Scope("tenant", "acme"): ScopeLimits(tpm=1_000),
        Scope("key", "k"): ScopeLimits(tokens_per_day=300),
    })
    adm = Admission(table, store)
    chain = Parties("acme", key="k").scope_chain()
    assert await adm.allowed_tokens(chain, NOW, prompt_tokens=50) == 250
    g = await adm.reserve(chain, Amounts(1, 50, 200), NOW)
    assert isinstance(g, Grant)
    assert await adm.allowed_tokens(chain, NOW, prompt_tokens=20) == 30
    assert await adm.allowed_tokens([Scope("tenant", "other")], NOW) is None
    heads = {h.limit_name: h for h in g.headroom}
    assert (heads["tpm"].remaining, heads["tokens_per_day"].remaining) == (750, 50)


async def test_openai_ratelimit_headers_from_headroom_and_denial(store: CounterStore) -> None:
    from tokenplane.admission.headers import denial_headers, ratelimit_headers

    table = LimitTable({Scope("tenant", "acme"): ScopeLimits(rpm=5, tpm=1_000),
                        Scope("key", "k"): ScopeLimits(rpm=3, max_concurrent=9)})
    adm = Admission(table, store)
    chain = Parties("acme", key="k").scope_chain()
    g = await adm.reserve(chain, Amounts(1, 100, 150), NOW)
    assert isinstance(g, Grant)
    assert ratelimit_headers(g.headroom) == {
        "x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "2",
        "x-ratelimit-reset-requests": "1m0s",
        "x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "750",
        "x-ratelimit-reset-tokens": "1m0s",
    }
    d = await adm.reserve(chain, Amounts(1, 900), NOW + 0.5)
    assert isinstance(d, Denial) and d.limit_name == "tpm"
    assert denial_headers(d) == {"retry-after": "60"}

