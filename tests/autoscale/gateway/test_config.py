"""``autoscale:`` in the config: off unless a pool is set, every mistake named by its
path, as ``tokenplane config check`` prints it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenplane.autoscale.gateway.policies import pool_spec
from tokenplane.compose.config_file import ConfigError, default_config_dict, validate_config

ROOT = Path(__file__).resolve().parents[3]


def _config(pools: dict[str, Any], **section: Any) -> dict[str, Any]:
    return {
        "models": [
            {"alias": "chat", "backends": [{"type": "sim", "replicas": 1}]},
            {"alias": "hosted", "backends": [{"type": "vllm",
                                               "base_url": "http://127.0.0.1:9/v1"}]},
        ],
        "autoscale": {"pools": pools, **section},
    }


def _errors(cfg: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    return info.value.errors


def test_off_unless_a_pool_is_set() -> None:
    assert not validate_config(default_config_dict()).autoscale.enabled
    cfg = validate_config(_config({"chat": {}}))
    assert cfg.autoscale.enabled
    pool = cfg.autoscale.pools["chat"]
    assert (pool.policy, pool.cooldown, pool.min_replicas, pool.actuator) == (
        "tokenplane", 900.0, 1, None)  # the embedded actuator, 15 minutes of cooldown


def test_durations_read_like_the_slo_section() -> None:
    cfg = validate_config(_config({"chat": {"cooldown": "5m", "scale_down_window": 90,
                                            "cold_start": "1500ms", "promote": 0}},
                                  interval="250ms"))
    pool = cfg.autoscale.pools["chat"]
    assert (pool.cooldown, pool.scale_down_window, pool.cold_start, pool.promote) == (
        300.0, 90.0, 1.5, 0.0)
    assert cfg.autoscale.interval == 0.25


@pytest.mark.parametrize(("pools", "expected"), [
    ({"nope": {}}, "autoscale.pools.nope: no model alias 'nope'"),
    ({"hosted": {}}, "autoscale.pools.hosted.actuator: required"),
    ({"hosted": {"actuator": "embedded"}},
     "autoscale.pools.hosted.actuator: embedded scales only type: sim"),
    ({"chat": {"min_replicas": 5, "max_replicas": 2}},
     "autoscale.pools.chat: min_replicas (5) must not exceed max_replicas (2)"),
    ({"chat": {"warm_min": 3, "warm_max": 1}},
     "autoscale.pools.chat: warm_min (3) must not exceed warm_max (1)"),
    ({"chat": {"budget_per_hour": 10, "price_per_replica_hour": 0}},
     "autoscale.pools.chat: budget_per_hour needs price_per_replica_hour"),
    ({"chat": {"min_replicas": 0}},
     "autoscale.pools.chat.min_replicas: the embedded actuator keeps at least one"),
    ({"chat": {"policy": "magic"}}, "autoscale.pools.chat.policy: Input should be"),
    ({"chat": {"cooldown": "soon"}}, "autoscale.pools.chat.cooldown: 'soon' is not a duration"),
    ({"chat": {"cooldown": -5}}, "autoscale.pools.chat.cooldown: a duration must be positive"),
    ({"chat": {"max_step": 0}}, "autoscale.pools.chat.max_step: Input should be greater"),
    ({"chat": {"actuator": "docker"}}, "autoscale.pools.chat.actuator: Input should be"),
    ({"chat": {"replicas": 3}}, "autoscale.pools.chat.replicas: unknown field"),
    ({"chat": {"actuator": "kubernetes"}},
     "autoscale.pools.chat: actuator: kubernetes needs the kubernetes section"),
    ({"chat": {"kubernetes": {"name": "vllm"}}},
     "autoscale.pools.chat: actuator: kubernetes needs the kubernetes section"),
    ({"chat": {"actuator": "kubernetes", "kubernetes": {"kind": "Job", "name": "x"}}},
     "autoscale.pools.chat.kubernetes.kind: Input should be"),
    ({"chat": {"actuator": "kubernetes", "kubernetes": {"name": "x", "warm_name": "x"}}},
     "autoscale.pools.chat.kubernetes: warm_name must name another workload"),
])
def test_mistakes_are_named_by_path(pools: dict[str, Any], expected: str) -> None:
    errors = _errors(_config(pools))
    assert any(e.startswith(expected) for e in errors), errors


def test_a_kubernetes_pool_needs_no_sim_backend() -> None:
    cfg = validate_config(_config({"hosted": {
        "actuator": "kubernetes", "kubernetes": {"kind": "LeaderWorkerSet", "name": "vllm"}}}))
    assert cfg.autoscale.pools["hosted"].actuator == "kubernetes"
    k = cfg.autoscale.pools["hosted"].kubernetes
    assert k is not None and (k.kind, k.name, k.namespace) == ("LeaderWorkerSet", "vllm",
                                                               "default")


def test_config_check_prints_the_paths(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_config({"nope": {}, "chat": {"interval": 3}})))
    out = subprocess.run([sys.executable, "-m", "tokenplane", "config", "check", str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "autoscale.pools.chat.interval: unknown field" in out.stdout
    path.write_text(yaml.safe_dump(_config({"nope": {}})))
    out = subprocess.run([sys.executable, "-m", "tokenplane", "config", "check", str(path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "autoscale.pools.nope: no model alias 'nope'" in out.stdout


def test_flap_damping_maps_to_the_policy_spec() -> None:
    cfg = validate_config(_config({"chat": {}}))
    assert pool_spec(cfg.autoscale.pools["chat"], 120.0, 10.0).max_reversals_per_hour == 2
    cfg = validate_config(_config({"chat": {"max_reversals_per_hour": None}}))
    assert pool_spec(cfg.autoscale.pools["chat"], 120.0, 10.0).max_reversals_per_hour is None
    errors = _errors(_config({"chat": {"max_reversals_per_hour": 0}}))
    assert any(e.startswith("autoscale.pools.chat.max_reversals_per_hour") for e in errors)
