"""``/metrics`` names every tenant's traffic and cost: the public port refuses it without
the metrics token or an admin key; the metrics listener (loopback by default) serves it,
with the token when one is configured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.gateway.harness import GatewayThread, free_port, sim_config
from tokenplane.config.schema import GatewayConfig

MODEL = "sim-llama3-8b"


def _chat(gw: GatewayThread, key: str) -> None:
    resp = httpx.post(gw.base_url + "/chat/completions", headers={"authorization": f"Bearer {key}"},
                      json={"model": MODEL, "max_tokens": 2,
                            "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
    assert resp.status_code == 200, resp.text


def _refused(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json()["error"]["code"] == code
    assert resp.headers["x-request-id"].startswith("req_")
    assert "tokenplane_requests_total" not in resp.text
    if status == 401:
        assert resp.headers["www-authenticate"] == "Bearer"


def test_default_listener_is_loopback() -> None:
    cfg = GatewayConfig.model_validate(sim_config())
    assert cfg.observe.metrics.listen == "127.0.0.1:9464"
    assert cfg.observe.metrics.token_env is None


def test_public_port_refuses_metrics_the_listener_serves_them(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(), tmp_path).start()
    try:
        tenant, admin = gw.create_key("acme"), gw.create_key("default", admin=True)
        _chat(gw, tenant)
        public = f"http://127.0.0.1:{gw.port}/metrics"
        _refused(httpx.get(public), 401, "invalid_api_key")
        _refused(httpx.get(public, headers={"authorization": "Bearer sk-wrong"}), 401,
                 "invalid_api_key")
        _refused(httpx.get(public, headers={"authorization": f"Bearer {tenant}"}), 403,
                 "admin_required")
        ok = httpx.get(public, headers={"authorization": f"Bearer {admin}"})
        assert ok.status_code == 200 and 'tenant="acme"' in ok.text
        assert gw.metrics_url.startswith("http://127.0.0.1:")
        scraped = httpx.get(gw.metrics_url)  # no key: the listener is the operator's
        assert scraped.status_code == 200 and 'tenant="acme"' in scraped.text
        assert scraped.headers["content-type"].startswith("text/plain")
        _refused(httpx.get(gw.metrics_url.removesuffix("/metrics") + "/v1/models"), 404,
                 "unknown_route")
    finally:
        gw.stop()


def test_a_configured_token_guards_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TP_TEST_METRICS_TOKEN", "s3cret-scrape-token")
    cfg = sim_config()
    cfg["observe"] = {"metrics": {"token_env": "TP_TEST_METRICS_TOKEN"}}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        _chat(gw, gw.create_key("acme"))
        public = f"http://127.0.0.1:{gw.port}/metrics"
        for url in (gw.metrics_url, public):
            _refused(httpx.get(url), 401, "invalid_api_key")
            _refused(httpx.get(url, headers={"authorization": "Bearer s3cret-scrape-tokeN"}),
                     401, "invalid_api_key")
            ok = httpx.get(url, headers={"authorization": "Bearer s3cret-scrape-token"})
            assert ok.status_code == 200 and 'tenant="acme"' in ok.text
    finally:
        gw.stop()


def test_an_unset_token_variable_is_refused_at_start(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TP_TEST_METRICS_TOKEN", raising=False)
    cfg = sim_config()
    cfg["observe"] = {"metrics": {"token_env": "TP_TEST_METRICS_TOKEN", "listen": None}}
    gw = GatewayThread(cfg, tmp_path)
    with pytest.raises(ValueError, match=r"observe.metrics.token_env: \$TP_TEST_METRICS_TOKEN"):
        gw.start()
    gw.stop()


@pytest.mark.parametrize("listen", ["9464", "localhost", "127.0.0.1:99999", ":9464"])
def test_listen_must_be_host_port(listen: str) -> None:
    cfg = sim_config()
    cfg["observe"] = {"metrics": {"listen": listen}}
    with pytest.raises(ValueError, match="host:port"):
        GatewayConfig.model_validate(cfg)


def test_serve_says_which_token_variable_is_unset(tmp_path: Path) -> None:
    cfg = sim_config()
    cfg["observe"] = {"metrics": {"token_env": "TP_TEST_METRICS_TOKEN"}}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TOKENPLANE_") and k != "TP_TEST_METRICS_TOKEN"}
    env["TOKENPLANE_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-m", "tokenplane", "serve", "--config", str(path),
                          "--port", str(free_port())], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    assert "observe.metrics.token_env: $TP_TEST_METRICS_TOKEN is not set" in out.stderr
    assert "Traceback" not in out.stderr
