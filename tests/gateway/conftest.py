from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.harness import GatewayThread, sim_config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gw = GatewayThread(sim_config(), Path(tmp_path_factory.mktemp("gw"))).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def api_key(gateway: GatewayThread) -> str:
    return gateway.create_key("default", department="eng", app="chat")
