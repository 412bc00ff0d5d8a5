"""The fuzz suite's gateway: a real one on a real port (simulated engines), its
published ``/openapi.json``, an admin key and a tenant key.

How many examples each fuzz test draws comes from a Hypothesis profile of this suite
(not loaded globally, so other suites keep theirs): ``fuzz-ci`` by default (bounded for
CI), ``fuzz-long`` for a longer local run:

    TOKENPLANE_FUZZ_PROFILE=fuzz-long python -m pytest --timeout 0 tests/fuzz
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import GatewayThread, sim_config

MODEL = "sim-llama3-8b"
FUZZ_TENANT = "fuzzco"  # the admin fuzz may create and delete under it, nothing else


class Fuzzed:
    """What the fuzz tests send with: a keep-alive client on the gateway's front."""

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.base = gw.base_url.removesuffix("/v1")
        self.client = httpx.Client(base_url=self.base, timeout=30)
        self.admin_key = gw.create_key("ops", admin=True)
        self.tenant_key = gw.create_key("default", app="fuzz")
        self.keys = {"admin": self.admin_key, "tenant": self.tenant_key}
        gw.create_key(FUZZ_TENANT)
        doc = self.client.get("/openapi.json")
        assert doc.status_code == 200, doc.text
        self.doc: dict[str, Any] = doc.json()

    def body_schema(self, path: str, method: str = "post") -> dict[str, Any]:
        op = self.doc["paths"][path][method]
        schema: dict[str, Any] = op["requestBody"]["content"]["application/json"]["schema"]
        return schema

    def still_serves(self) -> None:
        """A normal request after the fuzzing is answered as before."""
        resp = self.client.post("/v1/chat/completions", headers=self.auth("tenant"), json={
            "model": MODEL, "messages": [{"role": "user", "content": "still there?"}],
            "max_tokens": 3})
        assert resp.status_code == 200, resp.text
        assert resp.json()["choices"][0]["message"]["role"] == "assistant"

    def auth(self, who: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[who]}"}


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    g = GatewayThread(sim_config(replicas=1), Path(tmp_path_factory.mktemp("fuzz"))).start()
    f = Fuzzed(g)
    try:
        yield f
    finally:
        f.client.close()
        g.stop()
