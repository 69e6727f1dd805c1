"""CURVE on the shuffle sockets: who may connect, and counting who was turned away.

Owned here: :class:`ZapHandler`, a ZAP (ZeroMQ RFC 27) handler that admits a CURVE client
only if its public key belongs to a current member of the job and names that member as
the connection's User-Id (so a frame's routing id can be checked against who
authenticated); and the helpers that make a socket a CURVE server or client. A client
that is refused never gets a frame through: libzmq fails its handshake, and the handler
counts the refusal. The handler runs on the ForwardingUnit's thread, polled like any
other socket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import zmq
from zmq.utils import z85

from streamtrain.shuffle.settings import CurveKeys

__all__ = ["ZAP_ENDPOINT", "ZapHandler", "make_curve_client", "make_curve_server"]

ZAP_ENDPOINT: Final = "inproc://zeromq.zap.01"
_ZAP_VERSION: Final = b"1.0"
ZAP_DOMAIN: Final = "streamtrain.shuffle"


def make_curve_server(socket: zmq.Socket[bytes], keys: CurveKeys) -> None:
    socket.curve_secretkey = keys.secret_key
    socket.curve_publickey = keys.public_key
    socket.curve_server = True
    socket.zap_domain = ZAP_DOMAIN.encode()


def make_curve_client(socket: zmq.Socket[bytes], keys: CurveKeys, server_key: bytes) -> None:
    socket.curve_secretkey = keys.secret_key
    socket.curve_publickey = keys.public_key
    socket.curve_serverkey = server_key


class ZapHandler:
    """Admits CURVE clients whose key is a member's; counts every refusal.

    ``allowed`` maps a Z85 public key to the worker id it belongs to; it is called on
    every handshake, so membership changes apply to the next connection.
    """

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], allowed: Callable[[], Mapping[bytes, str]]
    ) -> None:
        self._socket: zmq.Socket[bytes] = context.socket(zmq.REP)
        self._socket.linger = 0
        self._socket.bind(ZAP_ENDPOINT)
        self._allowed = allowed
        self.accepted = 0
        self.refused = 0

    @property
    def socket(self) -> zmq.Socket[bytes]:
        return self._socket

    def handle(self) -> None:
        """Answer one pending ZAP request (call when the socket is readable)."""
        request = self._socket.recv_multipart()
        if len(request) < 6:
            # not a ZAP request at all; a REP socket must still answer
            self.refused += 1
            self._socket.send_multipart([_ZAP_VERSION, b"", b"500", b"malformed", b"", b""])
            return
        version, request_id, _domain, _address, _identity, mechanism = request[:6]
        credentials = request[6:]
        worker: str | None = None
        if version == _ZAP_VERSION and mechanism == b"CURVE" and len(credentials) == 1:
            worker = self._allowed().get(z85.encode(credentials[0]))
        if worker is None:
            self.refused += 1
            self._socket.send_multipart(
                [_ZAP_VERSION, request_id, b"400", b"not a member of this job", b"", b""]
            )
            return
        self.accepted += 1
        self._socket.send_multipart([_ZAP_VERSION, request_id, b"200", b"OK", worker.encode(), b""])

    def close(self) -> None:
        self._socket.close(linger=0)
