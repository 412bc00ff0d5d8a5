"""The governance config section, policy resolution per tenant / app, and audit keys."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.governance.audit.keyfile import resolve_key
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.pii_policy import PiiAction


def gov(**kw: object) -> GovernanceConfig:
    return GovernanceConfig.model_validate(kw)


@pytest.mark.parametrize("bad", [
    {"pii": {"prompt": {"default": "shred"}}},
    {"pii": {"response": {"default": "tokenize"}}},
    {"overrides": [{"tenant": "a", "pii": {"response": {"default": "tokenize"}}}]},
    {"injection": {"flag_at": 0.9, "block_at": 0.5}},
    {"audit": {"retention": "full"}},  # needs encryption_key_env
    {"audit": {"hmac_key_env": "sk-not-a-name!"}},
    {"overrides": [{"tenant": "a"}, {"tenant": "a"}]},
    {"tools": {"mode": "ignore"}},
    {"unknown": 1},
])
def test_bad_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        gov(**bad)


def test_defaults() -> None:
    pol = GuardPolicies(gov()).for_principal("t", None)
    assert pol.prompt is not None and pol.prompt.default is PiiAction.LOG
    assert pol.response is None and not pol.response_rewrites  # responses not scanned
    assert pol.injection is not None and pol.injection.mode.value == "flag"
    assert pol.tools.allowed is None and pol.max_output_tokens is None
    assert GovernanceConfig().audit.retention == "redacted"
    assert GovernanceConfig().audit.retention_days == 180


def test_overrides_layer_tenant_then_app() -> None:
    policies = GuardPolicies(gov(
        max_output_tokens=100,
        overrides=[
            {"tenant": "acme", "pii": {"prompt": {"default": "mask"}}, "max_output_tokens": 50,
             "tools": {"allowed": ["a"], "mode": "strip"}},
            {"tenant": "acme", "app": "hr", "pii": {"response": {"default": "mask"}},
             "injection": {"mode": "block"}, "models": ["m1"]},
        ]))
    base = policies.for_principal("other", "hr")
    assert base.prompt is not None and base.prompt.default is PiiAction.LOG
    assert base.max_output_tokens == 100 and base.models is None
    acme = policies.for_principal("acme", "web")
    assert acme.prompt is not None and acme.prompt.default is PiiAction.MASK
    assert acme.tool_results is not None and acme.tool_results.default is PiiAction.MASK
    assert acme.max_output_tokens == 50 and acme.tools.allowed == frozenset({"a"})
    hr = policies.for_principal("acme", "hr")
    assert hr.prompt is not None and hr.prompt.default is PiiAction.MASK  # from the tenant
    assert hr.response_rewrites and hr.models == frozenset({"m1"})
    assert hr.injection is not None and hr.injection.mode.value == "block"
    assert policies.for_principal("acme", "hr") is hr  # cached


def test_key_from_env_wins_and_short_keys_fail(tmp_path: Path) -> None:
    found = resolve_key(tmp_path, "K", env={"K": "x" * 20})
    assert found is not None and found[0] == b"x" * 20
    assert found[1].kind == "env" and not found[1].in_data_dir
    assert not (tmp_path / "audit.key").exists()
    with pytest.raises(ValueError):
        resolve_key(tmp_path, "K", env={"K": "short"})
    assert resolve_key(tmp_path, "K", env={}, create=False) is None


def test_generated_key_is_shared_by_workers_starting_together(tmp_path: Path) -> None:
    results: list[tuple[bytes, str]] = []  # key, kind
    barrier = threading.Barrier(6)

    def start() -> None:
        barrier.wait()
        found = resolve_key(tmp_path, "K", env={})
        assert found is not None and found[1].in_data_dir
        results.append((found[0], found[1].kind))

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({k for k, _ in results}) == 1
    assert [s for _, s in results].count("generated") == 1
    assert os.stat(tmp_path / "audit.key").st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.key"]  # no temp files left
