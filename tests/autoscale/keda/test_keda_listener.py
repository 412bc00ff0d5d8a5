"""The scaler's listener and its config, and the committed stubs against the
vendored proto."""

from __future__ import annotations

import filecmp
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tokenplane.autoscale.gateway.keda.board import Desired, DesiredBoard, UnknownPool
from tokenplane.autoscale.gateway.keda.server import KedaScalerServer
from tokenplane.compose.config_file import ConfigError, validate_config
from tokenplane.config.keda_schema import KedaConfig

ROOT = Path(__file__).resolve().parents[3]
PROTO_DIR = ROOT / "src/tokenplane/autoscale/gateway/keda/proto"


def test_off_by_default_and_listen_checked() -> None:
    assert KedaConfig().listen is None
    assert KedaConfig(listen="0.0.0.0:9465").listen == "0.0.0.0:9465"
    assert KedaConfig(listen="[::1]:9465").listen == "[::1]:9465"
    for bad in ("9465", "host:port", "127.0.0.1:70000", ":9465"):
        with pytest.raises(ValidationError, match="host:port"):
            KedaConfig(listen=bad)
    with pytest.raises(ValidationError, match="Extra inputs"):
        KedaConfig.model_validate({"listen": None, "port": 9465})


async def test_a_taken_port_is_an_os_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = KedaScalerServer(DesiredBoard(), f"127.0.0.1:{port}", 30.0)
        with pytest.raises(OSError, match=f"autoscale.keda.listen 127.0.0.1:{port}"):
            await server.start()


async def test_start_twice_refused_and_stop_idempotent() -> None:
    board = DesiredBoard()
    board.register("a")
    server = KedaScalerServer(board, "127.0.0.1:0", 30.0)
    await server.start()
    assert server.port > 0
    with pytest.raises(RuntimeError, match="already serving"):
        await server.start()
    await server.stop(0)
    await server.stop(0)


def test_committed_stubs_are_what_the_proto_generates(tmp_path: Path) -> None:
    subprocess.run(
        [str(ROOT / "scripts/gen-keda-stubs"), str(tmp_path)],
        check=True, env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    fresh = tmp_path / "tokenplane/autoscale/gateway/keda/proto"
    names = ["externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py"]
    assert sorted(p.name for p in fresh.iterdir()) == sorted(names)
    for name in names:
        assert filecmp.cmp(fresh / name, PROTO_DIR / name, shallow=False), (
            f"{name} differs from what scripts/gen-keda-stubs generates: rerun it")


def test_board_rejects_negative_unknown_and_double_registration() -> None:
    board = DesiredBoard()
    board.register("a")
    assert board.get("a") is None and board.age("a") is None
    with pytest.raises(ValueError, match="already"):
        board.register("a")
    with pytest.raises(ValueError, match="negative"):
        board.set("a", Desired(-1, 0))
    with pytest.raises(UnknownPool):
        board.set("b", Desired(1, 0))
    with pytest.raises(UnknownPool):
        board.get("b")
    board.set("a", Desired(0, 0))
    before = board.version
    board.set("a", Desired(0, 0))
    assert board.version == before  # no change, no wake-up


def _config(pool: dict[str, object], keda: dict[str, object]) -> dict[str, object]:
    return {
        "models": [{"alias": "chat", "backends": [
            {"type": "vllm", "base_url": "http://127.0.0.1:8001"}]}],
        "autoscale": {"pools": {"chat": pool}, "keda": keda},
    }


def test_config_check_pairs_keda_pools_with_the_listener() -> None:
    cfg = validate_config(_config({"actuator": "keda"}, {"listen": "127.0.0.1:9465"}))
    assert cfg.autoscale.keda.listen == "127.0.0.1:9465"
    with pytest.raises(ConfigError) as err:
        validate_config(_config({"actuator": "keda"}, {}))
    assert err.value.errors == ["autoscale.pools.chat.actuator: keda needs "
                                "autoscale.keda.listen (where KEDA's operator reads the "
                                "decisions)"]
    with pytest.raises(ConfigError) as err:
        validate_config(_config({"actuator": "kubernetes", "kubernetes": {"name": "engine"}},
                                {"listen": "127.0.0.1:9465"}))
    assert err.value.errors == ["autoscale.keda.listen: set, but no pool has actuator: "
                                "keda (nothing to serve KEDA)"]
    with pytest.raises(ConfigError) as err:
        validate_config(_config({"actuator": "keda"}, {"listen": "9465"}))
    assert any(e.startswith("autoscale.keda.listen: ") and "host:port" in e
               for e in err.value.errors)
