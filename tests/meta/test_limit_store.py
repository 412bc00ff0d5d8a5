"""Limits persisted in meta.db: validation, merge, scope ids, reload across processes,
and the store that configuration selects."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.gateway.harness import sim_config
from tokenplane.admission import LimitError, MemoryStore, ResilientStore, Scope, ScopeLimits
from tokenplane.app import build_gateway
from tokenplane.compose.config_file import validate_config
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import (
    LimitStore,
    LimitTarget,
    admission_parties,
    budget_micros,
    limits_from_dict,
    limits_to_dict,
)


def test_set_merges_validates_and_deletes(tmp_path: Path) -> None:
    store = LimitStore(tmp_path / "meta.db")
    t = LimitTarget("acme", department="eng")
    store.set(t, {"rpm": 10})
    spec = store.set(t, {"tpm": 500, "tpm_unit": "output_tokens"})
    assert (spec.rpm, spec.tpm, spec.tpm_unit) == (10, 500, "output_tokens")
    assert store.set(t, {"rpm": None}).rpm is None
    with pytest.raises(LimitError, match="rpm"):
        store.set(t, {"rpm": -1})
    with pytest.raises(LimitError, match="unknown limit fields"):
        store.set(t, {"rqm": 1})
    assert store.get(t) == spec.__class__(tpm=500, tpm_unit="output_tokens")
    assert store.table.rules(Scope("department", "acme/eng"))[0].name == "tpm"
    assert store.delete(t) and not store.delete(t)
    assert store.table.rules(Scope("department", "acme/eng")) == ()
    store.close()


def test_scope_ids_are_tenant_qualified() -> None:
    a = admission_parties("a", "eng", "bot", "key_1", "u1").scope_chain("m")
    b = admission_parties("b", "eng", "bot", "key_2", "u1").scope_chain("m")
    assert not set(a) & set(b)  # two tenants' same-named departments never share limits
    assert LimitTarget("a", department="eng", app="bot").scope() == Scope("app", "a/eng/bot")
    assert LimitTarget("a", app="bot").scope() == Scope("app", "a//bot")
    assert LimitTarget("a", key_id="key_1", model="m").scope() == Scope("key", "key_1", "m")
    assert LimitTarget("a", user="u1").scope() in a


def test_another_process_change_is_picked_up(tmp_path: Path) -> None:
    gateway = LimitStore(tmp_path / "meta.db", reload_s=0)
    cli = LimitStore(tmp_path / "meta.db")
    assert not gateway.refresh()
    cli.set(LimitTarget("acme"), {"rpm": 3})
    assert gateway.refresh()
    assert gateway.table.rules(Scope("tenant", "acme"))[0].limit == 3
    assert not gateway.refresh()  # nothing new: no reload
    slow = LimitStore(tmp_path / "meta.db", reload_s=3600)
    cli.set(LimitTarget("acme"), {"rpm": 4})
    assert not slow.refresh(now=slow._checked + 1)  # within its reload interval
    for s in (gateway, cli, slow):
        s.close()


limits_strategy = st.builds(
    ScopeLimits,
    rpm=st.none() | st.integers(0, 10**9), tpm=st.none() | st.integers(0, 10**9),
    tokens_per_day=st.none() | st.integers(0, 10**12),
    budget_micros=st.none() | st.integers(0, 10**15),
    max_concurrent=st.none() | st.integers(0, 10**6),
)


@given(limits_strategy)
def test_limits_round_trip(spec: ScopeLimits) -> None:
    back = limits_from_dict(limits_to_dict(spec))
    assert back.rules() == spec.rules()


def test_budget_amounts_are_exact() -> None:
    assert budget_micros("2.50") == 2_500_000
    assert budget_micros("0.000001") == 1
    with pytest.raises(LimitError):
        budget_micros("-1")
    with pytest.raises(LimitError):
        budget_micros("lots")


def test_configuration_selects_the_store(tmp_path: Path) -> None:
    cfg = sim_config()
    cfg["data_dir"] = str(tmp_path)
    plain = build_gateway(validate_config(cfg))
    assert plain.admission is not None and isinstance(plain.admission.store, MemoryStore)
    plain.admission.limits.close()
    plain.keys.close()
    cfg["redis_url"] = "redis://127.0.0.1:1/0"  # connects lazily
    cfg["admission"] = {"failure_mode": "fail_open", "replicas": 3}
    shared = build_gateway(validate_config(cfg))
    assert shared.admission is not None
    store = shared.admission.store
    assert isinstance(store, ResilientStore)
    assert (store.mode, store.replicas) == ("fail_open", 3)
    shared.admission.limits.close()
    shared.keys.close()


def test_cli_fixed_period_budget(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokenplane.admission.periods import Period
    from tokenplane.cli.main import build_cli

    runner = CliRunner()
    keys = KeyStore(tmp_path / "meta.db")
    keys.ensure_scope("acme", None, None)  # limits need an existing tenant
    keys.close()
    ok = runner.invoke(build_cli(), [
        "limits", "set", "--tenant", "acme", "--user", "alice", "--budget", "0.25",
        "--period", "fixed", "--resets-at", "2026-12-15", "--resets-at",
        "2027-01-15T00:00:00+01:00", "--home", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert "user:acme/alice" in ok.output
    store = LimitStore(tmp_path / "meta.db")
    spec = store.get(LimitTarget("acme", user="alice"))
    store.close()
    assert spec is not None and spec.budget_micros == 250_000
    first = datetime(2026, 12, 15, tzinfo=UTC).timestamp()
    second = datetime(2027, 1, 14, 23, tzinfo=UTC).timestamp()  # 00:00 at +01:00
    assert spec.budget_period == Period("fixed", (first, second))
    bad = runner.invoke(build_cli(), ["limits", "set", "--tenant", "acme", "--budget", "1",
                                      "--period", "fixed", "--home", str(tmp_path)])
    assert bad.exit_code == 2 and "reset date" in bad.output
