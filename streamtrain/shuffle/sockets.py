"""The sockets of one ForwardingUnit, created, used and closed on its thread.

Owned here: :class:`PeerSockets`: one ZeroMQ context (one per worker process), the
ROUTER that receives record batches, the PUB that broadcasts state events, per peer a
DEALER (batches out, answers in; to a worker of an older release with the routing id
its release accepts, :mod:`~streamtrain.shuffle.legacy`) and a SUB (that peer's events,
and only that peer's), and with CURVE the ZAP handler and the handshake-failure
monitors.

Every socket is owned from the moment it exists: a peer whose sockets cannot be set up
(an address that does not resolve, a key libzmq refuses) has them closed at once and is
reported to the caller, and :meth:`PeerSockets.close` destroys the context with every
socket it ever made, so closing never waits on a socket someone forgot. Every socket has
``linger`` set explicitly and a bound on the frames it accepts (``MAXMSGSIZE``: a peer
that sends more is disconnected by libzmq). The ROUTER never hands a connected routing
id over to a new connection, and is ``ROUTER_MANDATORY``: an answer to a sender that is
not connected fails loudly (and is counted) instead of vanishing. pyzmq sockets are not
thread-safe, so nothing here is touched from another thread.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final

import zmq

from streamtrain.shuffle import codec
from streamtrain.shuffle.frames import routing_id
from streamtrain.shuffle.legacy import Dialect, LegacyDialer
from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.security import ZapHandler, make_curve_client, make_curve_server
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.stats import ForwardingCounters

__all__ = ["CONTROL_FRAME_BYTES", "PeerSockets"]

_LOG = logging.getLogger(__name__)

CONTROL_FRAME_BYTES: Final = 64 * 1024
"""The largest ACK, grant or state event a socket accepts (they are a few dozen bytes)."""
UNREACHABLE_RETRY_S: Final = 30.0
"""How long a peer whose sockets could not be set up is left out before trying again
(unless it announces something new)."""

_FAILED_HANDSHAKES = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


class PeerSockets:
    """The sockets of one ForwardingUnit thread (created, used and closed there)."""

    def __init__(self, settings: ShuffleSettings, dialer: LegacyDialer | None = None) -> None:
        self._settings = settings
        self._dialer = dialer if dialer is not None else LegacyDialer()
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.route = routing_id(settings.worker_id, secrets.token_bytes(16))
        self.dealers: dict[str, zmq.Socket[bytes]] = {}
        self.subs: dict[str, zmq.Socket[bytes]] = {}
        self.zap: ZapHandler | None = None
        self.monitors: list[zmq.Socket[bytes]] = []
        self._refused: dict[str, tuple[PeerInfo, float]] = {}
        try:
            self.router = self._server(zmq.ROUTER, settings.max_frame_bytes)
            self.router.router_handover = 0
            self.router.router_mandatory = 1
            self.pub = self._server(zmq.PUB, CONTROL_FRAME_BYTES)
            self.pub.linger = 200  # let LEFT go out
            self.data_endpoint = _bind(self.router, settings)
            self.event_endpoint = _bind(self.pub, settings)
        except zmq.ZMQError:
            self.close()
            raise

    def _server(self, kind: int, max_frame_bytes: int) -> zmq.Socket[bytes]:
        socket = self.context.socket(kind)
        socket.linger = 0
        socket.maxmsgsize = max_frame_bytes
        socket.ipv6 = self._settings.bind_host.startswith("[")
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

    def refused_recently(self, info: PeerInfo, now: float) -> bool:
        """Whether :meth:`connect` failed for this very ``info`` within
        ``UNREACHABLE_RETRY_S`` (no point trying again, nor logging it again)."""
        entry = self._refused.get(info.worker_id)
        if entry is None:
            return False
        refused, retry_at = entry
        if refused != info or now >= retry_at:
            del self._refused[info.worker_id]
            return False
        return True

    def connect(self, info: PeerInfo, poller: zmq.Poller, now: float) -> bool:
        """Connect a DEALER and a SUB to ``info``; ``False`` (nothing left open, the reason
        logged, the peer left out for a while) when libzmq refuses its address or key.
        The DEALER of a worker of an older release speaks the dialect the
        :class:`~streamtrain.shuffle.legacy.LegacyDialer` found it speaks."""
        worker = info.worker_id
        made: list[zmq.Socket[bytes]] = []
        plain_route = info.legacy and self._dialer.dialect(worker) is Dialect.PLAIN
        try:
            dealer = self._dealer(info, made, plain_route)
            sub = self._client(zmq.SUB, info, made)
            sub.maxmsgsize = CONTROL_FRAME_BYTES
            sub.setsockopt(zmq.SUBSCRIBE, codec.KIND_STATE)
            sub.connect(info.event_endpoint)
        except zmq.ZMQError as exc:
            for socket in made:
                socket.close(linger=0)
            self._refused[worker] = (info, now + UNREACHABLE_RETRY_S)
            _LOG.warning(
                "cannot connect to peer %s at %s / %s (%s): leaving it out",
                worker,
                info.data_endpoint,
                info.event_endpoint,
                exc,
            )
            return False
        self.dealers[worker], self.subs[worker] = dealer, sub
        poller.register(dealer, zmq.POLLIN)
        poller.register(sub, zmq.POLLIN)
        return True

    def timed_out(self, info: PeerInfo, sent_at: float, now: float, poller: zmq.Poller) -> bool:
        """A batch sent to ``info`` at ``sent_at`` ran out of time at ``now``. ``True`` if
        ``info`` is of an older release that answered nothing since, so it dropped the
        batch for its routing id: the DEALER is replaced by one with the other kind."""
        if not info.legacy or info.worker_id not in self.dealers:
            return False
        switched = self._dialer.timed_out(info.worker_id, sent_at, now)
        if switched is None:
            return False
        _LOG.info("peer %s of an older release: speaking %s", info.worker_id, switched.value)
        self._redial(info, poller, plain_route=switched is Dialect.PLAIN)
        return True

    def _redial(self, info: PeerInfo, poller: zmq.Poller, *, plain_route: bool) -> None:
        old = self.dealers.pop(info.worker_id, None)
        if old is not None:
            poller.unregister(old)
            old.close(linger=0)
        made: list[zmq.Socket[bytes]] = []
        try:
            dealer = self._dealer(info, made, plain_route)
        except zmq.ZMQError:
            for socket in made:
                socket.close(linger=0)
            raise
        self.dealers[info.worker_id] = dealer
        poller.register(dealer, zmq.POLLIN)

    def _dealer(
        self, info: PeerInfo, made: list[zmq.Socket[bytes]], plain_route: bool
    ) -> zmq.Socket[bytes]:
        dealer = self._client(zmq.DEALER, info, made)
        dealer.immediate = 1
        dealer.routing_id = self._settings.worker_id.encode("utf-8") if plain_route else self.route
        dealer.maxmsgsize = CONTROL_FRAME_BYTES
        dealer.connect(info.data_endpoint)
        return dealer

    def _client(
        self, kind: int, info: PeerInfo, made: list[zmq.Socket[bytes]]
    ) -> zmq.Socket[bytes]:
        socket = self.context.socket(kind)
        made.append(socket)
        socket.linger = 0
        socket.ipv6 = "[" in info.data_endpoint or "[" in info.event_endpoint
        if self._settings.curve is not None and info.curve_public_key is not None:
            make_curve_client(socket, self._settings.curve, info.curve_public_key)
        return socket

    def disconnect(self, worker_id: str, poller: zmq.Poller) -> None:
        self._dialer.forget(worker_id)
        for sockets in (self.dealers, self.subs):
            socket = sockets.pop(worker_id, None)
            if socket is not None:
                poller.unregister(socket)
                socket.close(linger=0)

    def close(self) -> None:
        """Close every socket and the context; never blocks on a socket left open."""
        for sockets in (self.dealers, self.subs):
            for socket in sockets.values():
                socket.close(linger=0)
            sockets.clear()
        for monitor in self.monitors:
            monitor.close(linger=0)
        if self.zap is not None:
            self.zap.close()
        pub = getattr(self, "pub", None)
        if pub is not None:
            pub.close()  # its linger lets LEFT go out
        # destroy() closes whatever is still open with linger 0, then terminates
        self.context.destroy(linger=0)

    def __enter__(self) -> PeerSockets:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _bind(socket: zmq.Socket[bytes], settings: ShuffleSettings) -> str:
    """Bind ``socket`` as ``settings`` say; return the endpoint peers connect to (the
    advertised host, never a wildcard)."""
    host = settings.bind_host
    port = settings.data_port if socket.type == zmq.ROUTER else settings.event_port
    if port:
        socket.bind(f"tcp://{host}:{port}")
    else:
        port = socket.bind_to_random_port(f"tcp://{host}")
    return f"tcp://{settings.announced_host}:{port}"
