"""The gRPC listener KEDA's operator connects to (``autoscale.keda.listen``)."""

from __future__ import annotations

import grpc

from tokenplane.autoscale.gateway.keda.board import DesiredBoard
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2_grpc as pb_grpc
from tokenplane.autoscale.gateway.keda.servicer import ExternalScaler

# One process answers KEDA: with SO_REUSEPORT (grpcio's default on Linux) a second
# gateway worker would bind the same port and answer from a board it never writes.
_OPTIONS = (("grpc.so_reuseport", 0),)


class KedaScalerServer:
    """Serves :class:`ExternalScaler` over plain HTTP/2 (in a cluster, behind a
    Service only the KEDA operator reaches; see deploy/kubernetes/)."""

    def __init__(self, board: DesiredBoard, listen: str, stale_after_s: float) -> None:
        self.listen = listen
        self._board = board
        self._stale_after_s = stale_after_s
        self._server: grpc.aio.Server | None = None
        self._port = 0

    @property
    def serving(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        """The bound port (the one the OS chose for ``host:0``)."""
        return self._port

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the KEDA scaler is already serving")
        server = grpc.aio.server(options=_OPTIONS)
        add = pb_grpc.add_ExternalScalerServicer_to_server
        add(ExternalScaler(self._board, self._stale_after_s), server)  # type: ignore[no-untyped-call]
        try:
            self._port = server.add_insecure_port(self.listen)
        except RuntimeError as exc:  # grpcio raises it when the bind fails
            raise OSError(f"autoscale.keda.listen {self.listen}: cannot listen ({exc})") from exc
        await server.start()
        self._server = server

    async def stop(self, grace: float = 1.0) -> None:
        """Stop listening; open ``StreamIsActive`` streams are cancelled after
        ``grace`` seconds."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
