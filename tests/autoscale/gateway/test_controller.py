"""The controller's round: one process acts for a shared actuator (the leader, here
the file lock of one host's workers), the others run the policy and act on nothing;
when the leader goes, another takes over. A pool whose round fails leaves the others
theirs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tokenplane.autoscale.baselines import StaticPolicy
from tokenplane.autoscale.gateway.controller import AutoscaleController, PoolControl
from tokenplane.autoscale.gateway.decision_log import DecisionLog, read_decisions
from tokenplane.autoscale.gateway.signals import PoolSignals
from tokenplane.autoscale.model import ReplicaView
from tokenplane.config.schema import ModelConfig
from tokenplane.routing.gateway.replicas import LiveView
from tokenplane.slo.gateway.leader import open_leadership
from tokenplane.upstream.pool import Pool


class SharedDeployment:
    """A pool's replicas as a cluster would hold them (what a Kubernetes or KEDA
    actuator reads and sets), shared by every gateway process."""

    kind = "shared"

    def __init__(self, replicas: int) -> None:
        self.replicas_n = replicas
        self.calls: list[tuple[str, int, int]] = []

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def replicas(self, pool: str) -> tuple[ReplicaView, ...]:
        if pool == "broken":
            raise RuntimeError("the API server is down")
        return tuple(ReplicaView(f"{pool}-{i}", "serving", 0.0)
                     for i in range(self.replicas_n))

    async def scale_to(self, pool: str, serving: int, warm: int) -> None:
        self.calls.append((pool, serving, warm))
        self.replicas_n = serving


def _controller(home: Path, deployment: SharedDeployment, who: str) -> AutoscaleController:
    controls = []
    for alias in ("broken", "chat"):
        model = ModelConfig.model_validate({"alias": alias, "backends": [{"type": "sim"}]})
        signals = PoolSignals(alias, Pool(model), LiveView(), None, None, [], lambda: 0.0)
        controls.append(PoolControl(alias, StaticPolicy("static-peak", 3), signals,
                                    deployment))
    leader = open_leadership(home, None, None, "tp:", 1.0, name="autoscale")
    return AutoscaleController(controls, DecisionLog(home / who), 1.0, leader=leader)


def test_one_process_acts_and_another_takes_over(tmp_path: Path) -> None:
    deployment = SharedDeployment(1)

    async def run() -> None:
        first = _controller(tmp_path, deployment, "a")
        second = _controller(tmp_path, deployment, "b")
        await first.step()
        await second.step()
        assert (first.leading, second.leading) == (True, False)
        # the leader scaled chat (broken failed alone); the follower acted on nothing
        assert deployment.calls == [("chat", 3, 0)]
        assert second.pools["chat"].decision is not None  # it ran the policy all the same
        assert not second.decisions.recent
        await first.close()  # the leader goes
        await second.step()
        assert second.leading
        assert deployment.calls == [("chat", 3, 0), ("chat", 3, 0)]
        await second.close()

    asyncio.run(run())
    assert [(d["serving_from"], d["serving_to"]) for d in read_decisions(tmp_path / "a")] == [
        (1, 3)]
    assert read_decisions(tmp_path / "b") == []  # 3 -> 3 changed nothing
