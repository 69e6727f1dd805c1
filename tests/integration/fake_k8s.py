"""A fake Kubernetes API server for the scale subresource, on 127.0.0.1, for executor tests.

Serves GET and PATCH on
``/apis/apps/v1/namespaces/{ns}/{deployments|statefulsets}/{name}/scale`` with
``autoscaling/v1`` Scale objects, records every request, and can be told to fail the
next N requests with a status. Like the real API server, it omits ``spec.replicas`` when
it is 0, and ``status.replicas`` keeps the old count until :meth:`FakeKubernetes.converge`.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_SCALE_PATH = re.compile(
    r"^/apis/apps/v1/namespaces/(?P<ns>[^/]+)/(?P<resource>deployments|statefulsets)"
    r"/(?P<name>[^/]+)/scale$"
)
_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # without the query string
    query: str
    content_type: str | None
    authorization: str | None
    body: Any  # parsed JSON, or None


class FakeKubernetes:
    """``with FakeKubernetes() as api: api.add("deployments", "ns", "name", 2)``."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._spec: dict[tuple[str, str, str], int] = {}
        self._status: dict[tuple[str, str, str], int] = {}
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- test controls -----------------------------------------------------------------

    def add(self, resource: str, namespace: str, name: str, replicas: int) -> None:
        with self._lock:
            self._spec[(resource, namespace, name)] = replicas
            self._status[(resource, namespace, name)] = replicas

    def fail_next(self, count: int, status: int = 500) -> None:
        with self._lock:
            self._failures.extend([status] * count)

    def replicas(self, resource: str, namespace: str, name: str) -> int:
        with self._lock:
            return self._spec[(resource, namespace, name)]

    def converge(self) -> None:
        with self._lock:
            self._status.update(self._spec)

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeKubernetes:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_PATCH(self) -> None:
                fake._handle(self, "PATCH")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> FakeKubernetes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the API -----------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path, _, query = handler.path.partition("?")
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        content_type = handler.headers.get("Content-Type")
        authorization = handler.headers.get("Authorization")
        with self._lock:
            self.requests.append(
                RecordedRequest(method, path, query, content_type, authorization, body)
            )
            failure = self._failures.pop(0) if self._failures else None
            match = _SCALE_PATH.match(path)
            key = (match["resource"], match["ns"], match["name"]) if match else None
            if failure is not None:
                answer = _status(failure, "injected failure")
            elif key is None or key not in self._spec:
                answer = _status(404, f"{path} not found")
            elif method == "PATCH":
                answer = self._patch(key, content_type, body)
            else:
                answer = (200, self._scale(key))
        code, payload = answer
        data = json.dumps(payload).encode()
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _patch(
        self, key: tuple[str, str, str], content_type: str | None, body: Any
    ) -> tuple[int, dict[str, Any]]:
        if content_type not in _PATCH_TYPES:
            return _status(415, f"unsupported patch type {content_type}")
        try:
            replicas = body["spec"]["replicas"]
        except (TypeError, KeyError):
            return _status(422, "the patch has no spec.replicas")
        if not isinstance(replicas, int) or replicas < 0:
            return _status(422, f"spec.replicas: Invalid value: {replicas!r}")
        self._spec[key] = replicas
        return 200, self._scale(key)

    def _scale(self, key: tuple[str, str, str]) -> dict[str, Any]:
        resource, namespace, name = key
        spec = {"replicas": self._spec[key]} if self._spec[key] else {}  # omitempty
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{resource}-{namespace}-{name}",
                "resourceVersion": str(len(self.requests)),
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": spec,
            "status": {"replicas": self._status[key], "selector": f"app={name}"},
        }


def _status(code: int, message: str) -> tuple[int, dict[str, Any]]:
    reasons = {404: "NotFound", 403: "Forbidden", 422: "Invalid", 415: "UnsupportedMediaType"}
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reasons.get(code, "InternalError"),
        "code": code,
    }
