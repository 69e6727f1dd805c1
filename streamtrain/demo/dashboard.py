"""The demo's live dashboard: one page and a JSON endpoint, on 127.0.0.1 by default.

Owned here: :class:`Dashboard`, a threaded HTTP server that serves

* ``GET /``: ``dashboard.html`` (no external scripts or fonts: it works offline), which
  polls ``api/state`` every second and draws the charts on canvases;
* ``GET /api/state``: the JSON the ``state`` callable returns (the demo's timeline,
  record counts and phase);
* ``POST /api/burst``: calls ``burst`` (the traffic generator adds a burst of records,
  so a lag spike and its SLO alert can be shown on demand). Only the page itself may
  (no cross-site request forgery): the request must carry the run's token (a random one per
  dashboard, written into the page it serves) in ``X-Streamtrain-Csrf``, and an
  ``Origin`` header, when sent, must be this server's own; anything else is a 403 and
  ``burst`` is not called. A custom header also makes a browser ask before a
  cross-site POST, which this server never allows.

Anything else is a 404. The server runs in a daemon thread; :meth:`Dashboard.close`
stops it.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from streamtrain.errors import ConfigError, StreamtrainError

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)

_TOKEN_SLOT = b"__STREAMTRAIN_CSRF_TOKEN__"
CSRF_HEADER = "X-Streamtrain-Csrf"


class Dashboard:
    """See the module docstring."""

    def __init__(
        self,
        state: Callable[[], dict[str, Any]],
        burst: Callable[[], str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        page = resources.files("streamtrain.demo").joinpath("dashboard.html").read_bytes()
        self.csrf_token = secrets.token_urlsafe(24)
        page = page.replace(_TOKEN_SLOT, self.csrf_token.encode())
        handler = _handler(page, state, burst, self.csrf_token)
        try:
            self.server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve the dashboard on {host}:{port} ({exc}): choose another "
                "--dashboard-port (0 picks a free one)"
            ) from exc
        self.server.daemon_threads = True
        self.host = host
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="demo-dashboard", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def _handler(
    page: bytes, state: Callable[[], dict[str, Any]], burst: Callable[[], str], token: str
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            log.debug("dashboard: " + format, *args)

        def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
            elif path == "/api/state":
                self._json(HTTPStatus.OK, state())
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {path}"})

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != "/api/burst":
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no action {self.path}"})
                return
            refused = self._forged()
            if refused is not None:
                log.warning("dashboard: refused a POST /api/burst: %s", refused)
                self._json(HTTPStatus.FORBIDDEN, {"message": refused})
                return
            try:
                message = burst()
            except StreamtrainError as exc:
                self._json(HTTPStatus.CONFLICT, {"message": str(exc)})
                return
            self._json(HTTPStatus.OK, {"message": message})

        def _forged(self) -> str | None:
            """Why this POST is not the page's own, or None (module docstring)."""
            sent = self.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), token.encode()):
                return f"missing or wrong {CSRF_HEADER} token (reload the dashboard)"
            origin = self.headers.get("Origin")
            if origin is not None and origin != f"http://{self.headers.get('Host', '')}":
                return f"cross-origin request from {origin!r}"
            return None

    return Handler
