"""The KEDA actuator of one pool: it carries a decision out by publishing the desired
counts on the :class:`DesiredBoard`; KEDA reads them over gRPC and scales the pool's
engine Deployment (and, with a second ScaledObject, its warm Deployment)."""

from __future__ import annotations

from tokenplane.autoscale.gateway.keda.board import Desired, DesiredBoard


class KedaActuator:
    """Scales a pool through KEDA. Kubernetes does the starting and stopping; this
    actuator only knows what it last asked for, so :meth:`current` is that (the
    replicas actually up come from endpoint discovery, not from here)."""

    def __init__(self, board: DesiredBoard, pool: str, initial: Desired | None = None) -> None:
        self.pool = pool
        self._board = board
        board.register(pool, initial or Desired(serving=0, warm=0))

    def current(self) -> Desired:
        return self._board.get(self.pool)

    async def scale_to(self, serving: int, warm: int) -> None:
        self._board.set(self.pool, Desired(serving=serving, warm=warm))
