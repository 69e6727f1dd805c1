"""The sockets of one ForwardingUnit, created, used and closed on its thread.

Owned here: :class:`PeerSockets`: one ZeroMQ context (one per worker process), the
ROUTER that receives record batches, the PUB that broadcasts state events, the SUB that
reads the peers' events, one DEALER per peer, and with CURVE the ZAP handler and the
handshake-failure monitors. Every socket has ``linger`` set explicitly. pyzmq sockets
are not thread-safe, so nothing here is touched from another thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from streamtrain.shuffle import codec
from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.security import ZapHandler, make_curve_client, make_curve_server
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.stats import ForwardingCounters

__all__ = ["PeerSockets"]

_FAILED_HANDSHAKES = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


class PeerSockets:
    """The sockets of one ForwardingUnit thread (created, used and closed there)."""

    def __init__(self, settings: ShuffleSettings) -> None:
        self._settings = settings
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.router = self._server(zmq.ROUTER)
        self.router.router_handover = 1
        self.pub = self._server(zmq.PUB)
        self.pub.linger = 200  # let LEFT go out
        self.sub = self.context.socket(zmq.SUB)
        self.sub.linger = 0
        self.sub.setsockopt(zmq.SUBSCRIBE, codec.KIND_STATE)
        self.dealers: dict[str, zmq.Socket[bytes]] = {}
        self._connected: dict[str, PeerInfo] = {}
        self.zap: ZapHandler | None = None
        self.monitors: list[zmq.Socket[bytes]] = []
        try:
            self.data_endpoint = _bind(self.router, settings.host, settings.data_port)
            self.event_endpoint = _bind(self.pub, settings.host, settings.event_port)
        except zmq.ZMQError:
            self.close()
            raise

    def _server(self, kind: int) -> zmq.Socket[bytes]:
        socket = self.context.socket(kind)
        socket.linger = 0
        if self._settings.curve is not None:
            make_curve_server(socket, self._settings.curve)
        return socket

    def start_zap(self, allowed: Callable[[], Mapping[bytes, str]]) -> None:
        self.zap = ZapHandler(self.context, allowed)
        for socket in (self.router, self.pub):
            self.monitors.append(socket.get_monitor_socket(_FAILED_HANDSHAKES))

    def extra_readers(self) -> list[zmq.Socket[bytes]]:
        return ([self.zap.socket] if self.zap is not None else []) + self.monitors

    def handle_security(self, ready: Mapping[Any, int], counters: ForwardingCounters) -> None:
        """Serve the ZAP handler and count failed handshakes, if their sockets are ready."""
        if self.zap is not None and self.zap.socket in ready:
            self.zap.handle()
            counters.zap_refused = self.zap.refused
        for monitor in self.monitors:
            if monitor in ready:
                while True:
                    try:
                        monitor.recv_multipart(flags=zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    counters.handshakes_failed += 1

    def connect(self, info: PeerInfo, poller: zmq.Poller) -> None:
        dealer = self.context.socket(zmq.DEALER)
        dealer.linger = 0
        dealer.immediate = 1
        dealer.routing_id = self._settings.worker_id.encode()
        if self._settings.curve is not None and info.curve_public_key is not None:
            make_curve_client(dealer, self._settings.curve, info.curve_public_key)
            make_curve_client(self.sub, self._settings.curve, info.curve_public_key)
        dealer.connect(info.data_endpoint)
        self.sub.connect(info.event_endpoint)
        self.dealers[info.worker_id] = dealer
        self._connected[info.worker_id] = info
        poller.register(dealer, zmq.POLLIN)

    def disconnect(self, info: PeerInfo, poller: zmq.Poller) -> None:
        dealer = self.dealers.pop(info.worker_id, None)
        if dealer is not None:
            poller.unregister(dealer)
            dealer.close(linger=0)
        if self._connected.pop(info.worker_id, None) is not None:
            with contextlib.suppress(zmq.ZMQError):
                self.sub.disconnect(info.event_endpoint)

    def close(self) -> None:
        for dealer in self.dealers.values():
            dealer.close(linger=0)
        self.dealers.clear()
        for monitor in self.monitors:
            monitor.close(linger=0)
        if self.zap is not None:
            self.zap.close()
        self.sub.close(linger=0)
        self.router.close(linger=0)
        self.pub.close()
        self.context.term()

    def __enter__(self) -> PeerSockets:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _bind(socket: zmq.Socket[bytes], host: str, port: int) -> str:
    if port:
        endpoint = f"tcp://{host}:{port}"
        socket.bind(endpoint)
        return endpoint
    socket.bind_to_random_port(f"tcp://{host}")
    return socket.get_string(zmq.LAST_ENDPOINT)
