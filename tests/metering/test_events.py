from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tokenplane.metering.events import EVENT_COLUMNS, UsageEvent, decode_event, encode_event
from tokenplane.metering.stores.migrations import EVENT_TABLE_COLUMNS
from tokenplane.tokens.counts import TokenCounts


def test_event_columns_match_ledger_table() -> None:
    # A new event field needs a migration adding its column.
    assert EVENT_COLUMNS == EVENT_TABLE_COLUMNS


def test_from_counts_maps_every_source() -> None:
    counts = TokenCounts(
        system=1, history=2, context=3, tools=4, user=5, cached=6, output=9, reasoning=4
    )
    ev = UsageEvent.from_counts("r", 1, 10.0, counts, tenant="acme")
    assert ev.input_tokens == 15
    assert (ev.input_system, ev.input_history, ev.input_context) == (1, 2, 3)
    assert (ev.input_tools, ev.input_user, ev.cached_input_tokens) == (4, 5, 6)
    assert (ev.output_tokens, ev.reasoning_tokens, ev.tenant) == (9, 4, "acme")
    assert ev.token_counts() == counts


@given(
    request_id=st.text(min_size=1, max_size=40),
    attempt=st.integers(0, 10),
    ts=st.floats(0, 4e9),
    tokens=st.integers(0, 10**9),
    flags=st.lists(st.text(max_size=10), max_size=3),
    first=st.none() | st.floats(0, 4e9),
)
def test_json_round_trip(
    request_id: str, attempt: int, ts: float, tokens: int, flags: list[str], first: float | None
) -> None:
    ev = UsageEvent(
        request_id=request_id,
        attempt=attempt,
        ts=ts,
        input_tokens=tokens,
        flags=flags,
        first_token_ts=first,
        stream=True,
        error_code=None,
    )
    assert decode_event(encode_event(ev)) == ev


def test_decode_ignores_unknown_fields() -> None:
    ev = decode_event(b'{"request_id":"a","attempt":0,"ts":1.0,"from_the_future":1}')
    assert ev == UsageEvent(request_id="a", attempt=0, ts=1.0)
