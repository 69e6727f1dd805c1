"""The local S3 server for the durable embedded broker: what Tansu's object store uses.

Owned here: :func:`serve`, an HTTP server on loopback that answers the S3 calls of
Tansu's ``s3://`` storage engine (the Rust ``object_store`` crate, path-style requests)
from an in-memory :class:`~streamtrain.s3local.store.S3Store` (:class:`_Handler` lists
the calls). ``GET /-stats`` (:data:`STATS_PATH`) answers the store's
:class:`~streamtrain.s3local.store.S3Stats` as JSON. Every request is checked first
(:meth:`_Handler._admitted`): only loopback clients holding this server's credentials
get anything.

Why not moto: moto answers every list by scanning *every* key of the bucket, and Tansu
lists all record batches of a partition on every fetch, so on a busy topic (≈160 new
objects/s in the chaos benchmark) the S3 server soon took all its CPU and a produce or
fetch waited tens of seconds. Here a list costs a binary search plus the keys it
returns. Data lives in this process's memory: it outlives the broker process (a
``kill -9`` of Tansu loses nothing) and goes with this one.

Run: ``python -m streamtrain.s3local.server --host 127.0.0.1 --port PORT --bucket NAME``,
with the credentials in ``STREAMTRAIN_S3_ACCESS_KEY_ID`` and
``STREAMTRAIN_S3_SECRET_ACCESS_KEY`` (:class:`~streamtrain.s3local.LocalS3` passes
them; without them the server makes random ones nobody knows).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import urllib.parse
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape, unescape

from streamtrain.errors import ConfigError
from streamtrain.ports import is_loopback
from streamtrain.s3local.checks import (
    ACCESS_KEY_ENV,
    SECRET_KEY_ENV,
    STATS_PATH,
    BadRequest,
    Credentials,
    content_length,
    decode_token,
    encode_token,
    host_problem,
    max_keys,
    payload_problem,
    signature_problem,
)
from streamtrain.s3local.store import (
    Cursor,
    PreconditionFailed,
    S3Object,
    S3Stats,
    S3Store,
    etag_matches,
)

__all__ = [
    "ACCESS_KEY_ENV",
    "REQUEST_TIMEOUT_S",
    "SECRET_KEY_ENV",
    "STATS_PATH",
    "PreconditionFailed",
    "S3Object",
    "S3Stats",
    "S3Store",
    "serve",
]

REQUEST_TIMEOUT_S = 30.0
_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


class _Handler(BaseHTTPRequestHandler):
    """``PUT`` (with ``If-None-Match: *`` for a create and ``If-Match: ETAG`` for an
    optimistic update), ``GET`` and ``HEAD`` (with ``If-Match`` / ``If-None-Match`` and
    ``Range``), ``DELETE``, ``ListObjectsV2`` (``prefix``, ``delimiter``,
    ``start-after``, ``continuation-token``, ``max-keys``), the bulk ``POST ?delete`` and
    ``PUT``/``HEAD`` of the bucket."""

    protocol_version = "HTTP/1.1"  # keep-alive: the object store pools its connections
    server_version = "streamtrain-s3"
    timeout = REQUEST_TIMEOUT_S  # a client that stops sending loses its thread, not ours
    store: S3Store
    bucket: str
    credentials: Credentials
    _request_body = b""

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would flood the broker's log

    # -- helpers -----------------------------------------------------------------------

    def _target(self) -> tuple[str, str, dict[str, str]]:
        """(bucket, key, query) of a path-style request."""
        parsed = urllib.parse.urlsplit(self.path)
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        return urllib.parse.unquote(bucket), urllib.parse.unquote(key), query

    def _admitted(self, *, head: bool = False) -> bool:
        """Check the request (:mod:`streamtrain.s3local.checks`) and read its body; False
        once refused.

        A malformed ``Content-Length`` or query gets HTTP 400 (and the connection
        closed), a ``Host`` that is not loopback or a request not signed with this
        server's credentials (AWS Signature Version 4, as Tansu signs) HTTP 403, so
        neither a browser page (cross-origin or through DNS rebinding) nor another
        program that does not hold the credentials can read, write or delete anything.
        ``/-stats`` needs only the loopback ``Host``. A handler waits at most
        :data:`REQUEST_TIMEOUT_S` for a request's bytes.
        """
        try:
            length = content_length(self.headers)
        except BadRequest as exc:
            self.close_connection = True  # where its body ends is unknown
            self._error(exc.status, exc.code, str(exc), head=head)
            return False
        problem = host_problem(self.headers.get("Host"))
        stats = self.command == "GET" and self.path == STATS_PATH
        if problem is None and not stats:
            problem = signature_problem(
                self.command, self.path, self.headers, self.credentials, time.time()
            )
        if problem is not None:
            self.close_connection = True  # its body, if any, is not read
            self._error(403, "AccessDenied", problem, head=head)
            return False
        self._request_body = self.rfile.read(length) if length else b""
        if len(self._request_body) != length:
            self.close_connection = True
            self._error(400, "IncompleteBody", f"{length} bytes announced", head=head)
            return False
        problem = payload_problem(self.headers, self._request_body)
        if problem is not None:
            self._error(400, "XAmzContentSHA256Mismatch", problem, head=head)
            return False
        return True

    def _reply(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        *,
        head: bool = False,
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, *, head: bool = False) -> None:
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message></Error>"
        ).encode()
        self._reply(status, body, {"Content-Type": "application/xml"}, head=head)

    def _object_headers(self, stored: S3Object) -> dict[str, str]:
        return {
            "ETag": stored.etag,
            "Last-Modified": formatdate(stored.modified_s, usegmt=True),
            "Content-Type": stored.content_type,
            "Accept-Ranges": "bytes",
        }

    def _bucket_ok(self, bucket: str, head: bool = False) -> bool:
        if bucket != self.bucket:
            self._error(404, "NoSuchBucket", f"no bucket {bucket!r}", head=head)
            return False
        return True

    # -- verbs -------------------------------------------------------------------------

    def do_PUT(self) -> None:
        if not self._admitted():
            return
        bucket, key, _ = self._target()
        body = self._request_body
        if not key:  # create the bucket: it exists already
            self._reply(200 if bucket == self.bucket else 409)
            return
        if not self._bucket_ok(bucket):
            return
        try:
            stored = self.store.put(
                key,
                body,
                self.headers.get("Content-Type") or "binary/octet-stream",
                if_match=self.headers.get("If-Match"),
                if_none_match=self.headers.get("If-None-Match"),
            )
        except PreconditionFailed:
            self._error(412, "PreconditionFailed", f"{key}: a condition does not hold")
            return
        self._reply(200, headers={"ETag": stored.etag})

    def do_GET(self) -> None:
        if self._admitted():
            self._get(head=False)

    def do_HEAD(self) -> None:
        if self._admitted(head=True):
            self._get(head=True)

    def _get(self, *, head: bool) -> None:
        bucket, key, query = self._target()
        if bucket == STATS_PATH[1:] and not head:  # no bucket name starts with "-"
            stats = json.dumps(dataclasses.asdict(self.store.stats())).encode()
            self._reply(200, stats, {"Content-Type": "application/json"})
            return
        if not self._bucket_ok(bucket, head):
            return
        if not key:
            if head:
                self._reply(200, head=True)
            else:
                try:
                    self._list(query)
                except BadRequest as exc:
                    self._error(exc.status, exc.code, str(exc))
            return
        stored = self.store.get(key)
        if stored is None:
            self._error(404, "NoSuchKey", f"no key {key!r}", head=head)
            return
        if_match, if_none_match = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        if if_match is not None and not etag_matches(if_match, stored.etag):
            self._error(412, "PreconditionFailed", "If-Match", head=head)
            return
        if if_none_match is not None and etag_matches(if_none_match, stored.etag):
            self._reply(304, headers=self._object_headers(stored) | {"Content-Length": "0"})
            return
        body, status, headers = stored.body, 200, self._object_headers(stored)
        wanted = self.headers.get("Range")
        if wanted is not None and not head:
            window = _byte_range(wanted, len(body))
            if window is None:
                self._error(416, "InvalidRange", wanted)
                return
            first, last = window
            headers["Content-Range"] = f"bytes {first}-{last}/{len(body)}"
            body, status = body[first : last + 1], 206
        headers["Content-Length"] = str(len(body))
        self._reply(status, body, headers, head=head)

    def do_DELETE(self) -> None:
        if not self._admitted():
            return
        bucket, key, _ = self._target()
        if self._bucket_ok(bucket):
            self.store.delete(key)
            self._reply(204)

    def do_POST(self) -> None:
        if not self._admitted():
            return
        bucket, _, query = self._target()
        body = self._request_body
        if not self._bucket_ok(bucket):
            return
        if "delete" not in query:
            self._error(501, "NotImplemented", "only the bulk delete is served")
            return
        deleted = []
        for chunk in body.split(b"<Key>")[1:]:
            key = _unescape(chunk.split(b"</Key>", 1)[0].decode())
            self.store.delete(key)
            deleted.append(f"<Deleted><Key>{escape(key)}</Key></Deleted>")
        xml = f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="{_XMLNS}">'
        self._reply(
            200,
            (xml + "".join(deleted) + "</DeleteResult>").encode(),
            {"Content-Type": "application/xml"},
        )

    def _list(self, query: dict[str, str]) -> None:
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        token = query.get("continuation-token")
        after = decode_token(token) if token else Cursor(query.get("start-after") or "")
        limit = max_keys(query)
        objects, prefixes, more = self.store.list(prefix, after, delimiter, limit)
        parts = [
            f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{_XMLNS}">',
            f"<Name>{escape(self.bucket)}</Name><Prefix>{escape(prefix)}</Prefix>",
            f"<KeyCount>{len(objects) + len(prefixes)}</KeyCount><MaxKeys>{limit}</MaxKeys>",
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>",
        ]
        if more is not None:
            parts.append(f"<NextContinuationToken>{encode_token(more)}</NextContinuationToken>")
        parts += [stored.entry for _key, stored in objects]
        for common in prefixes:
            parts.append(f"<CommonPrefixes><Prefix>{escape(common)}</Prefix></CommonPrefixes>")
        parts.append("</ListBucketResult>")
        self._reply(200, "".join(parts).encode(), {"Content-Type": "application/xml"})


def _unescape(text: str) -> str:
    return unescape(text, {"&quot;": '"', "&apos;": "'"})


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The (first, last) byte of a ``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` header."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first_text, _, last_text = spec.strip().partition("-")
    try:
        if not first_text:
            count = int(last_text)
            return (max(0, size - count), size - 1) if count > 0 and size else None
        first = int(first_text)
        last = min(size - 1, int(last_text)) if last_text else size - 1
    except ValueError:
        return None
    return (first, last) if first <= last else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client gone mid-answer (or silent past the timeout) is its business: no
        traceback; anything else is printed as the standard library does."""
        if isinstance(sys.exception(), ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def serve(
    host: str, port: int, bucket: str, credentials: Credentials | None = None
) -> ThreadingHTTPServer:
    """A server (not yet serving: call ``serve_forever``) on ``host:port`` for ``bucket``,
    serving requests signed with ``credentials`` (default: random ones nobody knows).

    Loopback only: ``host`` must be a loopback address (:class:`ConfigError` otherwise);
    the local S3 server is a test and demo fixture, not storage for a network."""
    if not is_loopback(host):
        raise ConfigError(f"the local S3 server binds loopback only, not {host!r}")
    attributes = {
        "store": S3Store(),
        "bucket": bucket,
        "credentials": credentials or Credentials.random(),
    }
    handler = type("Handler", (_Handler,), attributes)
    return _Server((host, port), handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bucket", required=True)
    args = parser.parse_args()
    key_id, secret = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    credentials = Credentials(key_id, secret) if key_id and secret else None
    server = serve(args.host, args.port, args.bucket, credentials)
    print(f"serving s3://{args.bucket}/ at http://{args.host}:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
