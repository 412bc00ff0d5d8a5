"""``serve --set key=value``: dotted paths into the config's data, values read as
YAML, applied before validation (so a bad value is refused as in the file)."""

from __future__ import annotations

import pytest

from tokenplane.compose.config_file import ConfigError, load_config
from tokenplane.compose.overrides import OverrideError, apply_overrides


def test_overrides_change_single_settings_of_the_embedded_default() -> None:
    cfg = load_config(None, ("server.port=8099", "observe.metrics.listen=127.0.0.1:9999",
                             "models.0.backends.0.replicas=3", "data_dir=/srv/tp",
                             "governance.audit.retention_days=7"))
    assert cfg.server.port == 8099
    assert cfg.observe.metrics.listen == "127.0.0.1:9999"
    assert cfg.models[0].backends[0].replicas == 3
    assert cfg.data_dir == "/srv/tp"
    assert cfg.governance.audit.retention_days == 7


def test_later_overrides_win_and_null_clears() -> None:
    cfg = load_config(None, ("observe.metrics.listen=127.0.0.1:1", "observe.metrics.listen=null"))
    assert cfg.observe.metrics.listen is None


def test_values_are_yaml() -> None:
    data = apply_overrides({"a": {}}, ("a.n=5", "a.s='5'", "a.l=[x, y]", "a.b=true", "a.e="))
    assert data == {"a": {"n": 5, "s": "5", "l": ["x", "y"], "b": True, "e": ""}}


@pytest.mark.parametrize(("override", "message"), [
    ("server.port", "expected KEY=VALUE"),
    ("=3", "expected KEY=VALUE"),
    ("server..port=3", "has an empty part"),
    ("models.x.alias=m", "a list is indexed by a number"),
    ("models.5.alias=m", "the list has 1 item(s)"),
    ("server.port.x=1", "cannot set 'x' inside a int"),
    ("server.port=[1", "not valid YAML"),
])
def test_bad_overrides_say_why(override: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message.replace("(", r"\(").replace(")", r"\)")):
        apply_overrides({"server": {"port": 1}, "models": [{"alias": "m"}]}, (override,))


def test_a_bad_value_is_refused_with_its_path() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ("server.port=-5",))
    assert err.value.errors[0].startswith("server.port:")
    with pytest.raises(ConfigError) as err:
        load_config(None, ("server.nope=1",))
    assert err.value.errors[0].startswith("server.nope:")
