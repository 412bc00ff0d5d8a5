"""The advisor's pure parts: sums that leave their inputs alone, the month scale, money
in micro-units, and the finish reason kept from an answer's choices."""

from __future__ import annotations

from decimal import Decimal

from tokenplane.advice.model import Aggregate, Rates, Window, micros
from tokenplane.advice.rightsizing import cost_at
from tokenplane.advice.rows import alias_key, group, spread
from tokenplane.operations.registry import standard_operations
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.upstream_call import absorb_json, note_finish


def test_group_sums_and_leaves_the_rows_alone() -> None:
    a = Aggregate(tenant="t", app="a", model="m", version="v1", requests=2, input_tokens=10)
    b = Aggregate(tenant="t", app="a", model="m", version="v2", requests=3, input_tokens=5)
    c = Aggregate(tenant="t", app="b", model="m", requests=1)
    out = group([a, b, c], alias_key)
    assert out[("t", "a", "m")].requests == 5 and out[("t", "a", "m")].input_tokens == 15
    assert out[("t", "b", "m")] is c  # a group of one is the row itself
    assert (a.requests, b.requests) == (2, 3)


def test_spread_of_answer_lengths() -> None:
    row = Aggregate(answers=4, answer_output_tokens=400,
                    answer_output_sq=3 * 100**2 + 100**2)
    assert spread(row) == 0.0
    row = Aggregate(answers=2, answer_output_tokens=300, answer_output_sq=100**2 + 200**2)
    assert spread(row) == 50.0


def test_month_scale_and_money() -> None:
    week = Window(0.0, 7 * 86400.0)
    assert week.per_month(7) == 30
    assert Window(0.0, 3600.0).per_month(1) == 30  # at least a day
    assert micros(1_000_000, Decimal("2.50")) == 2_500_000
    assert micros(3, Decimal("0.5")) == 2  # 1.5 rounds half up
    row = Aggregate(input_tokens=1000, cached_input_tokens=200, cache_write_tokens=100,
                    output_tokens=50)
    r = Rates(Decimal(1), Decimal("0.5"), Decimal(2), Decimal(4))
    assert cost_at(row, r) == 700 + 100 + 200 + 200


def _ctx() -> RequestContext:
    op = standard_operations()["/v1/chat/completions"]
    return RequestContext("r", "/v1/chat/completions", op, b"", {})


def test_the_finish_reason_prefers_length() -> None:
    ctx = _ctx()
    absorb_json(ctx, b'{"choices": [{"finish_reason": "stop"}, {"finish_reason": "length"},'
                     b' {"finish_reason": "stop"}], "usage": {"prompt_tokens": 1}}')
    assert ctx.finish_reason == "length"
    ctx = _ctx()
    note_finish(ctx, "tool_calls")
    note_finish(ctx, "stop")
    note_finish(ctx, None)
    assert ctx.finish_reason == "tool_calls"
