"""``tokenplane config check`` prints every error with its path in the file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tokenplane.cli.main import build_cli

BROKEN = """
server:
  port: 99999
models:
  - alias: good
    backends:
      - type: sim
  - alias: bad
    context_window: lots
    backends:
      - type: vllm
        base_url: not-a-url
      - type: openai
        base_url: https://api.example.com/v1
        api_key_env: sk-live-123
        surprise: 1
tenants:
  - departments: []
"""


def _check(tmp_path: Path, text: str) -> tuple[int, str]:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    result = CliRunner().invoke(build_cli(), ["config", "check", str(f)])
    return result.exit_code, result.output


def test_every_error_has_its_path(tmp_path: Path) -> None:
    code, out = _check(tmp_path, BROKEN)
    assert code == 1
    lines = out.splitlines()
    assert "server.port: Input should be less than or equal to 65535" in lines
    assert "models[1].context_window: Input should be a valid integer, unable to parse string " \
           "as an integer" in lines
    assert "models[1].backends[0].base_url: not a URL" in lines
    assert "models[1].backends[1].api_key_env: must be an environment variable name, not a key" \
        in lines
    assert "models[1].backends[1].surprise: unknown field" in lines
    assert "tenants[0].name: required field missing" in lines


def test_valid_config_and_unreadable_file(tmp_path: Path) -> None:
    code, out = _check(tmp_path, "models:\n  - alias: a\n    backends: [{type: sim}]\n")
    assert code == 0 and "ok" in out
    code, out = _check(tmp_path, "models: [\n")
    assert code == 1 and "not valid YAML" in out
    code, out = _check(tmp_path, "- just a list\n")
    assert code == 1 and "(root): the config must be a mapping" in out
