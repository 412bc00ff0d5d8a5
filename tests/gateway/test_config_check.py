"""``tokenplane config check`` prints every error with its path in the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
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


# --- what serve would refuse or misread, refused by check first (issue 13, item 16) ---

def _cfg(model: str = "", top: str = "", backend: str = "{type: sim}", tenants: str = "") -> str:
    return (f"{top}\nmodels:\n  - alias: a\n    backends: [{backend}]\n{model}\n"
            f"  - alias: b\n    backends: [{{type: sim}}]\n{tenants}")


CASES = {
    "chat_template": (_cfg(model="    chat_template: klingon"),
                      "models[0].chat_template: unknown chat family 'klingon'"),
    "mysql": (_cfg(top="database_url: mysql://u:p@db/tp"),
              "database_url: 'mysql' is not supported"),
    "redis_url": (_cfg(top="redis_url: http://cache:6379"), "redis_url: not a Redis URL"),
    "tokenizer_spec": (_cfg(model="    tokenizer: tiktoken:no_such_base"),
                       "models[0].tokenizer: tiktoken encoding 'no_such_base' unavailable"),
    "tokenizer_kind": (_cfg(model="    tokenizer: sentencepiece:/x.model"),
                       "models[0].tokenizer: unknown tokenizer spec 'sentencepiece:/x.model'"),
    "hf_missing": (_cfg(model="    tokenizer: hf:/nonexistent/tokenizer.json"),
                   "models[0].tokenizer: no tokenizer.json at '/nonexistent/tokenizer.json'"),
    "backend_ids": (_cfg(backend="{id: x, type: sim}, {id: x, type: sim}"),
                    "models[0].backends[1].id: duplicate backend id 'x' "
                    "(also models[0].backends[0])"),
    "tenants": (_cfg(tenants="tenants: [{name: t}, {name: t}]"),
                "tenants[1].name: duplicate tenant 't'"),
    "tenant_models": (_cfg(tenants="tenants: [{name: t, models: [a, nosuch]}]"),
                      "tenants[0].models[1]: no model alias 'nosuch'"),
    "profile": (_cfg(backend="{type: sim, profile: llama9-h900}"),
                "models[0].backends[0].profile: unknown engine profile 'llama9-h900'"),
    "pii_custom": (_cfg(top="governance: {pii: {analyzer: {custom: [{type: regex, "
                            "entity: X, pattern: '(('}]}}}"),
                   "governance.pii.analyzer.custom[0]: "),
    "pii_custom_type": (_cfg(top="governance: {pii: {analyzer: {custom: [{type: magic}]}}}"),
                        "governance.pii.analyzer.custom[0]: unknown recognizer type 'magic'"),
    "pii_analyzer_key": (_cfg(top="governance: {pii: {analyzer: {bultin: false}}}"),
                         "governance.pii.analyzer.bultin: unknown field"),
    "routing_alias": (_cfg(top="routing: {models: {nosuch: round_robin}}"),
                      "routing.models.nosuch: no model alias 'nosuch'"),
    "split_version": (_cfg(top="routing: {splits: {a: {weights: {v9: 1}}}}",
                           backend="{type: sim, model_version: v1}"),
                      "routing.splits.a.weights.v9: no backend of 'a' has model_version 'v9'"),
    "split_header": (_cfg(top="routing: {splits: {a: {weights: {v1: 1}, header: x-v, "
                              "header_versions: {'yes': v2}}}}",
                          backend="{type: sim, model_version: v1}"),
                     "routing.splits.a.header_versions.yes: no backend of 'a' has "
                     "model_version 'v2'"),
    "yaml_boolean_key": (_cfg(top="routing: {splits: {a: {weights: {v1: 1}, header: x-v, "
                                  "header_versions: {yes: v1}}}}",
                              backend="{type: sim, model_version: v1}"),
                         "routing.splits.a.header_versions.true: Input should be a valid "
                         "string (YAML reads an unquoted yes/no"),
    "currency": (_cfg(model="    prices: {currency: EUR, input: '1'}"),
                 "models[1].prices.currency: 'USD' differs from 'EUR' of models[0]"),
    "weight": (_cfg(backend="{type: sim, weight: 3}"),
               "models[0].backends[0]: weight is not read"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_refuses_what_serve_refuses(tmp_path: Path, name: str) -> None:
    text, expected = CASES[name]
    code, out = _check(tmp_path, text)
    assert code == 1, out
    assert any(line.startswith(expected) for line in out.splitlines()), out


def test_serve_refuses_with_the_same_lines_and_no_traceback(tmp_path: Path) -> None:
    """serve runs the same build: an unknown chat template is a path, not a traceback."""
    f = tmp_path / "c.yaml"
    f.write_text(CASES["chat_template"][0] + f"data_dir: {tmp_path / 'home'}\n")
    out = subprocess.run([sys.executable, "-m", "tokenplane", "serve", "--config", str(f),
                          "--port", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "models[0].chat_template: unknown chat family 'klingon'" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "home").exists()  # refused before anything was created


def test_warnings_do_not_fail_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TP_TEST_UNSET_KEY", raising=False)
    text = _cfg(backend="{type: openai, base_url: 'https://api.example.com', "
                        "api_key_env: TP_TEST_UNSET_KEY}, "
                        "{type: vllm, base_url: 'http://10.0.0.5:8000/v1'}",
                model="    tokenizer: my-private-model-7b")
    f = tmp_path / "c.yaml"
    f.write_text(text)
    result = CliRunner().invoke(build_cli(), ["config", "check", str(f)])
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("models[0].backends[0].api_key_env: $TP_TEST_UNSET_KEY is not set" in w
               for w in warnings)
    assert any("models[0].backends[0].base_url: https://api.example.com has no API version"
               in w for w in warnings)
    assert any("models[0].backends[1].base_url: http://10.0.0.5:8000/v1 ends in an API "
               "version" in w for w in warnings)
    assert any("models[0].tokenizer: 'my-private-model-7b' names no tokenizer" in w
               for w in warnings)


def test_database_url_from_the_environment_is_checked(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPLANE_DATABASE_URL", "mysql://db/tp")
    code, out = _check(tmp_path, _cfg())
    assert code == 1 and "$TOKENPLANE_DATABASE_URL: 'mysql' is not supported" in out


def test_unset_cached_input_price_is_the_input_price() -> None:
    from tokenplane.compose.config_file import validate_config
    from tokenplane.metering.events import UsageEvent
    from tokenplane.metering.price_book import price_book

    cfg = validate_config({"models": [{"alias": "a", "backends": [{"type": "sim"}],
                                       "prices": {"input": "2", "output": "0"}}]})
    ev = UsageEvent("r", 0, 0.0, model="a", input_tokens=1_000_000,
                    cached_input_tokens=500_000)
    assert price_book(cfg.models).cost(ev)[0] == 2_000_000


def test_an_unset_metrics_token_is_a_warning_of_what_serve_will_refuse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is fine; the host lacks the secret: check warns (it runs where secrets
    are absent, as in CI), serve refuses to start (tests/gateway/test_metrics_access)."""
    monkeypatch.delenv("TP_TEST_METRICS_TOKEN", raising=False)
    text = _cfg(top="observe: {metrics: {token_env: TP_TEST_METRICS_TOKEN}}")
    code, out = _check(tmp_path, text)
    assert code == 0
    assert "observe.metrics.token_env: $TP_TEST_METRICS_TOKEN is not set; serve refuses" in out
    monkeypatch.setenv("TP_TEST_METRICS_TOKEN", "t")
    code, out = _check(tmp_path, text)
    assert code == 0 and "TP_TEST_METRICS_TOKEN" not in out


FOUR_STAGES = """
server:
  port: 99999                      # 1. the schema: out of range
models:
  - alias: a
    chat_template: klingon         # 4. the build: no such chat family
    backends: [{type: sim}]
tenants:
  - name: t
    models: [a, nosuch]            # 2. the cross-references: no such alias
"""


def test_four_errors_in_four_stages_in_one_run(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: the schema's error, a cross-reference, the environment's URL and what
    only building the parts finds: all four in one run (it took three runs), grouped
    by where they are in the file."""
    monkeypatch.setenv("TOKENPLANE_DATABASE_URL", "mysql://db/tp")  # 3. the environment
    code, out = _check(tmp_path, FOUR_STAGES)
    assert code == 1
    lines = out.splitlines()
    expected = ["server.port: Input should be less than or equal to 65535",
                "tenants[0].models[1]: no model alias 'nosuch'",
                "$TOKENPLANE_DATABASE_URL: 'mysql' is not supported",
                "models[0].chat_template: unknown chat family 'klingon'"]
    for want in expected:
        assert sum(ln.startswith(want) for ln in lines) == 1, (want, out)
    assert "4 error(s)" in out
    # grouped: one block per part of the file, a blank line between blocks
    blocks = [b.splitlines() for b in out.split("4 error(s)")[0].strip().split("\n\n")]
    assert len(blocks) == 4 and all(len(b) == 1 for b in blocks)


def test_errors_of_one_part_stay_together(tmp_path: Path) -> None:
    code, out = _check(tmp_path, BROKEN)
    assert code == 1
    blocks = out.split(" error(s)")[0].rsplit("\n", 1)[0].strip().split("\n\n")
    sections = [{ln.split(".")[0].split("[")[0] for ln in b.splitlines()} for b in blocks]
    assert all(len(s) == 1 for s in sections), blocks
