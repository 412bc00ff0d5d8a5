"""``slos:`` in config: `config check` refuses what the policy could not run, with paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenplane.cli.main import build_cli
from tokenplane.compose.config_file import ConfigError, validate_config

MODELS = {"models": [{"alias": "chat", "backends": [{"type": "sim"}]}]}


def _slos(*slos: dict[str, object]) -> dict[str, object]:
    return {**MODELS, "slos": list(slos)}


GOOD = {"name": "chat-ttft", "selector": {"model": "chat", "slo_class": "interactive"},
        "slis": [{"kind": "ttft", "threshold": "1s"}, {"kind": "availability"}],
        "objective": 0.95, "window": "30d"}


def test_a_good_slo_loads() -> None:
    cfg = validate_config(_slos(GOOD))
    assert cfg.slos[0].window == 30 * 86400
    assert cfg.slos[0].slis[0].threshold == 1.0


@pytest.mark.parametrize("change,message", [
    ({"selector": {"model": "nosuch"}}, "slos[0].selector.model: no model alias 'nosuch'"),
    ({"selector": {"slo_class": "gold"}}, "slos[0].selector.slo_class: no SLO class 'gold'"),
    ({"objective": 1}, "slos[0].objective"),
    ({"objective": 0.0}, "slos[0].objective"),
    ({"window": "thirty days"}, "slos[0].window"),
    ({"slis": []}, "slos[0].slis"),
    ({"slis": [{"kind": "ttft"}]}, "slos[0].slis[0]: a ttft SLI needs a threshold"),
    ({"slis": [{"kind": "availability", "threshold": 1}]}, "takes no threshold"),
    ({"slis": [{"kind": "errors"}]}, "slos[0].slis[0].kind"),
    ({"slis": [{"kind": "availability"}, {"kind": "availability"}]}, "once in an SLO"),
    ({"alerts": [{"severity": "page", "burn_rate": 30, "long_window": "1h",
                  "short_window": "5m"}]}, "alerts[0].burn_rate: 30.0 can never be reached"),
    ({"alerts": [{"severity": "page", "burn_rate": 2, "long_window": "60d",
                  "short_window": "5m"}]}, "alerts[0].long_window: longer than"),
    ({"alerts": [{"severity": "sms", "burn_rate": 2, "long_window": "1h",
                  "short_window": "5m"}]}, "slos[0].alerts[0].severity"),
    ({"name": "has space"}, "slos[0].name"),
    ({"surprise": 1}, "slos[0].surprise"),
])
def test_bad_slos_are_refused_with_their_path(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(_slos({**GOOD, **change}))
    assert message in str(err.value)


def test_duplicate_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(_slos(GOOD, GOOD))
    assert "slos[1]: duplicate SLO name 'chat-ttft'" in str(err.value)


def test_config_check_accepts_the_example() -> None:
    example = Path(__file__).parents[2] / "examples" / "slos.yaml"
    result = CliRunner().invoke(build_cli(), ["config", "check", str(example)])
    assert result.exit_code == 0, result.output
