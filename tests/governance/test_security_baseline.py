"""With no configuration at all, no recognised PII value is written in clear anywhere
under the data directory (ledger, journal, audit, key store, logs), nor logged, and
API keys are stored only as hashes."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from tests.governance.gw_helpers import PII, PII_TEXT, governed


def _files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file()]


def test_no_pii_in_clear_under_the_data_directory(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "home"
    with governed(home, governance=None) as (gw, echo):
        key = gw.create_key("default", department="eng", app="chat")
        headers = {"authorization": f"Bearer {key}"}
        url = gw.base_url
        messages = [{"role": "system", "content": f"Known customer: {PII_TEXT}"},
                    {"role": "user", "content": PII_TEXT}]
        for body in (
            {"model": "echo", "messages": messages},
            {"model": "echo", "messages": messages, "stream": True, "seed": 1,
             "stream_options": {"include_usage": True}},
            {"model": "echo", "prompt": PII_TEXT, "max_tokens": 100},
            {"model": "echo", "prompt": PII_TEXT, "stream": True, "seed": 2},
            {"model": "echo", "messages": messages, "max_tokens": 10**6},  # refused: 400
            {"model": "echo", "messages": messages, "temperature": "hot"},  # refused: 400
        ):
            path = "/chat/completions" if "messages" in body else "/completions"
            r = httpx.post(url + path, json=body, headers=headers, timeout=30)
            assert r.status_code in (200, 400)
            if r.status_code == 200 and not body.get("stream"):
                assert PII_TEXT in r.text  # by default the client gets its answer unchanged
        assert PII_TEXT in echo.bodies[0]["messages"][1]["content"]  # and the model its prompt
        limit = gw.config.server.max_body_bytes
        big = {"model": "echo", "messages": [{"role": "user", "content": "x" * limit}]}
        too_big = httpx.post(url + "/chat/completions", json=big, headers=headers, timeout=30)
        assert too_big.status_code == 413  # request size limit
        assert gw.gateway.governance is not None and gw.gateway.governance.audit is not None
        gw.call(gw.gateway.governance.audit.flush())
    files = _files(home)
    names = {p.name for p in files}
    assert "ledger.db" in names and "meta.db" in names and "HEAD.json" in names
    audit = b"".join(p.read_bytes() for p in files if p.parent.parent.name == "audit")
    assert b"138****5678" in audit  # the content was kept, redacted
    for p in files:
        data = p.read_bytes()  # sqlite files too, as bytes; nothing is decompressed
        for value in PII:
            assert value.encode() not in data, f"{PII[value]} in clear in {p}"
        assert key.encode() not in data, f"API key in clear in {p}"
    for rec in caplog.records:
        text = rec.getMessage()
        for value in PII:
            assert value not in text, f"{PII[value]} logged by {rec.name}"
