"""Messages prompts counted exactly (issue 26): 50 varied Messages requests (tools,
images, documents, thinking, tool_use / tool_result history) against a gateway with a
simulated engine that counts with the same tokenizer and chat template. The 1,000
request version is ``bench/bench_messages_counts.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.gateway import messages_corpus as mc
from tests.gateway.harness import GatewayThread

N = 50
Run = tuple[list[dict[str, Any]], mc.Report]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    bodies = mc.corpus(N, seed=2612)
    gw = GatewayThread(mc.gateway_config(), Path(tmp_path_factory.mktemp("gw"))).start()
    key = gw.create_key("default", app="counts")
    return bodies, mc.check_counts(bodies, gw, key)


def test_the_corpus_is_varied(run: Run) -> None:
    bodies, _ = run
    text = str(bodies)
    assert sum(mc.has_image(b) for b in bodies) >= 5
    for kind in ("'tool_use'", "'tool_result'", "'thinking'", "'document'", "'is_error'"):
        assert kind in text, kind
    assert any(isinstance(b.get("system"), list) for b in bodies)
    assert any(isinstance(b.get("system"), str) for b in bodies)
    assert max(len(b.get("tools", ())) for b in bodies) >= 12


def test_count_tokens_is_the_engines_count(run: Run) -> None:
    _, report = run
    bad = [(o.index, o.count_tokens, o.engine) for o in report.outcomes
           if o.count_tokens != o.engine]
    assert not bad
    # images count as a fixed estimate on both sides, and say so
    assert {o.count_header for o in report.outcomes if o.images} == {"estimated"}
    assert {o.count_header for o in report.outcomes if not o.images} == {"exact"}


def test_the_ledger_meters_the_engines_count(run: Run) -> None:
    _, report = run
    assert all(o.ledger_input == o.engine for o in report.outcomes)


def test_the_pre_call_count_is_the_engines_count(run: Run) -> None:
    _, report = run
    bad = [(o.index, o.estimated, o.engine) for o in report.outcomes if o.estimated != o.engine]
    assert not bad


def test_the_pre_call_count_with_a_cached_tool(run: Run) -> None:
    """A tool's cache_control marker rides along as an extension, which the count (like
    the engine) does not see."""
    bodies, report = run
    cached = [o for o, b in zip(report.outcomes, bodies, strict=True)
              if mc.tool_cache_control(b)]
    assert cached
    assert all(o.estimated == o.engine for o in cached), [
        (o.index, o.estimated - o.engine) for o in cached if o.estimated != o.engine]
