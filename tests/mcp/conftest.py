"""The MCP tests' servers (module-wide) and a gateway in front of them (per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.harness import GatewayThread
from tests.mcp.support import gateway_config, tool_server


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with tool_server("fs") as fs, tool_server("crm") as crm:
        yield fs, crm


@pytest.fixture
def gw(servers: tuple[str, str], tmp_path: Path) -> Iterator[GatewayThread]:
    g = GatewayThread(gateway_config(*servers), tmp_path / "gw").start()
    yield g
    g.stop()
