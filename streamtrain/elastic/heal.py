"""How a torchft joiner gets the current weights from a live peer, without pickle.

Owned here: :class:`HealServer`, torchft's ``CheckpointTransport`` for streamtrain. A
live worker the lighthouse names as a joiner's source stages its state for that step
(:mod:`streamtrain.elastic.statecodec` bytes); the joiner fetches
``GET /state/<step>`` from it and decodes with every bound checked. torchft's own
transport unpickles what it fetches and listens on every interface; this one listens on
the engine's host (loopback by default) and never unpickles. The staged state is
dropped once the step's commit vote is over (``disallow_checkpoint``): a joiner healing
later is sent the state of its own step.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from torchft.checkpointing.transport import CheckpointTransport

from streamtrain.elastic.statecodec import decode, encode
from streamtrain.errors import ElasticError, SchemaError

__all__ = ["HealServer"]

log = logging.getLogger(__name__)

_PREFIX = "/state/"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, owner: HealServer) -> None:
        if ":" in host.strip("[]"):
            self.address_family = socket.AF_INET6
        super().__init__((host.strip("[]"), 0), _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        owner = self.server.owner
        self.connection.settimeout(owner.timeout_s)
        if not self.path.startswith(_PREFIX) or not self.path[len(_PREFIX) :].isdigit():
            self.send_error(404, "expected /state/<step>")
            return
        payload = owner.staged(int(self.path[len(_PREFIX) :]), owner.timeout_s)
        if payload is None:
            self.send_error(409, "no state staged for that step")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("heal server: " + format, *args)


class HealServer(CheckpointTransport[dict[str, Any]]):  # type: ignore[misc]
    """Serves this worker's state to joiners, fetches a peer's when healing."""

    def __init__(self, host: str, timeout_s: float, max_bytes: int) -> None:
        self.host = host
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._staged = threading.Condition()
        self._step = -1
        self._payload: bytes | None = None
        self._server = _Server(host, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="heal-server", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def staged(self, step: int, timeout_s: float) -> bytes | None:
        """The state staged for ``step``, waiting up to ``timeout_s`` for it: a joiner
        may ask before this worker's own quorum answer made it stage the state."""
        with self._staged:
            self._staged.wait_for(lambda: self._step == step, timeout_s)
            return self._payload if step == self._step else None

    # -- torchft's CheckpointTransport --------------------------------------------------

    def metadata(self) -> str:
        host = self.host if ":" not in self.host.strip("[]") else f"[{self.host.strip('[]')}]"
        return f"http://{host}:{self.port}{_PREFIX}"

    def send_checkpoint(
        self, dst_ranks: list[int], step: int, state_dict: dict[str, Any], timeout: timedelta
    ) -> None:
        payload = encode(state_dict)
        with self._staged:
            self._step, self._payload = step, payload
            self._staged.notify_all()
        log.info("staged %d bytes of state at step %d for %s", len(payload), step, dst_ranks)

    def disallow_checkpoint(self) -> None:
        with self._staged:
            self._step, self._payload = -1, None

    def recv_checkpoint(
        self, src_rank: int, metadata: str, step: int, timeout: timedelta
    ) -> dict[str, Any]:
        url = urlsplit(f"{metadata}{step}")
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise ElasticError(f"a peer announced an unusable heal address {metadata!r}")
        connection = http.client.HTTPConnection(
            url.hostname, url.port, timeout=timeout.total_seconds()
        )
        try:
            connection.request("GET", url.path)
            response = connection.getresponse()
            if response.status != 200:
                raise ElasticError(
                    f"the peer at {url.netloc} has no state for step {step} "
                    f"({response.status} {response.reason})",
                    retriable=True,
                )
            length = int(response.getheader("Content-Length") or "-1")
            if not 0 <= length <= self.max_bytes:
                raise ElasticError(
                    f"the peer at {url.netloc} sent a state of {length} bytes "
                    f"(limit {self.max_bytes})"
                )
            payload = response.read(length)
        finally:
            connection.close()
        try:
            state = decode(payload, self.max_bytes)
        except SchemaError as exc:
            raise ElasticError(f"the state from {url.netloc} is malformed: {exc}") from exc
        if not isinstance(state, dict):
            raise ElasticError(f"the state from {url.netloc} is not a mapping")
        log.info("fetched %d bytes of state at step %d from %s", length, step, url.netloc)
        return state

    def shutdown(self, wait: bool = True) -> None:
        self._server.shutdown()
        self._server.server_close()
        if wait:
            self._thread.join(self.timeout_s)
