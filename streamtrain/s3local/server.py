"""A small in-memory S3 server for the durable embedded broker: what Tansu's object store uses.

Owned here: :class:`S3Store` (objects in memory, keys kept sorted) and :func:`serve`, an
HTTP server on loopback that answers the S3 calls of Tansu's ``s3://`` storage engine
(the Rust ``object_store`` crate, path-style requests): ``PUT`` (with ``If-None-Match: *``
for a create and ``If-Match: ETAG`` for an optimistic update), ``GET`` and ``HEAD`` (with
``If-Match`` / ``If-None-Match`` and ``Range``), ``DELETE``, ``ListObjectsV2`` (``prefix``,
``delimiter``, ``start-after``, ``continuation-token``, ``max-keys``), the bulk
``POST ?delete`` and ``PUT``/``HEAD`` of the bucket.

Why not moto (which this replaced): moto answers every list by scanning *every* key of
the bucket and sorting the matches, and Tansu lists all record batches of a partition on
every fetch, so on a busy topic each list cost grew with the whole bucket (≈160 new
objects/s in the chaos benchmark): after a few minutes the S3 server took all its CPU
and a produce or fetch waited tens of seconds (the shuffle's membership heartbeats
arrived ≈50 s late, every peer looked expired). Here a list costs a binary search plus
the keys it returns.
Each object's ``<Contents>`` entry is rendered once, at its PUT, not at every list.
``GET /-stats`` (:data:`STATS_PATH`) answers the store's :class:`S3Stats` as JSON: how
many objects a client created and how many keys its lists read.

Not checked: request signatures (the server binds loopback and is a test fixture; the
threat model lists it as such). Data lives in this process's memory: it outlives the
broker process (a ``kill -9`` of Tansu loses nothing) and goes with this one.

Run: ``python -m streamtrain.s3local.server --host 127.0.0.1 --port PORT --bucket NAME``.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import hashlib
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape, unescape

from streamtrain.errors import ConfigError
from streamtrain.ports import is_loopback

__all__ = ["STATS_PATH", "S3Object", "S3Stats", "S3Store", "serve"]

MAX_KEYS = 1000
STATS_PATH = "/-stats"  # GET: the store's S3Stats as JSON
_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


@dataclass(frozen=True, slots=True)
class S3Object:
    body: bytes
    etag: str  # quoted, as S3 sends it
    modified_s: float
    content_type: str
    entry: str = ""  # its <Contents> element in a list, rendered once at the PUT


@dataclass(frozen=True, slots=True)
class S3Stats:
    """What the store served since it started: a way to see what a client costs."""

    objects: int  # stored now
    puts: int
    creates: int  # puts of a key that did not exist
    gets: int  # GET and HEAD of an object
    lists: int  # list pages served
    listed_keys: int  # keys and common prefixes in those pages


class PreconditionFailed(Exception):
    """An ``If-Match`` / ``If-None-Match`` that does not hold."""


class S3Store:
    """Objects by key, the keys kept sorted for prefix listing; thread-safe."""

    def __init__(self) -> None:
        self._objects: dict[str, S3Object] = {}
        self._keys: list[str] = []
        self._lock = threading.Lock()
        self._version = 0
        self._creates = self._gets = self._lists = self._listed_keys = 0

    def stats(self) -> S3Stats:
        with self._lock:
            return S3Stats(
                objects=len(self._keys),
                puts=self._version,
                creates=self._creates,
                gets=self._gets,
                lists=self._lists,
                listed_keys=self._listed_keys,
            )

    def put(
        self,
        key: str,
        body: bytes,
        content_type: str,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> S3Object:
        with self._lock:
            current = self._objects.get(key)
            if if_none_match == "*" and current is not None:
                raise PreconditionFailed(key)
            if if_match is not None and (
                current is None or not _etag_matches(if_match, current.etag)
            ):
                raise PreconditionFailed(key)
            self._version += 1
            digest = hashlib.md5(body + self._version.to_bytes(8, "little"), usedforsecurity=False)
            etag, modified_s = f'"{digest.hexdigest()}"', time.time()
            entry = (
                f"<Contents><Key>{escape(key)}</Key><LastModified>{_iso(modified_s)}"
                f"</LastModified><ETag>{escape(etag)}</ETag><Size>{len(body)}"
                "</Size><StorageClass>STANDARD</StorageClass></Contents>"
            )
            stored = S3Object(body, etag, modified_s, content_type, entry)
            if current is None:
                bisect.insort(self._keys, key)
                self._creates += 1
            self._objects[key] = stored
            return stored

    def get(self, key: str) -> S3Object | None:
        with self._lock:
            self._gets += 1
            return self._objects.get(key)

    def delete(self, key: str) -> None:
        with self._lock:
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]

    def _list_locked(
        self, prefix: str, after: str, delimiter: str, max_keys: int
    ) -> tuple[list[tuple[str, S3Object]], list[str], str | None]:
        objects: list[tuple[str, S3Object]] = []
        prefixes: list[str] = []
        start = (
            bisect.bisect_right(self._keys, after)
            if after >= prefix
            else bisect.bisect_left(self._keys, prefix)
        )
        index = start
        last: str | None = None
        while index < len(self._keys):
            key = self._keys[index]
            if not key.startswith(prefix):
                break
            if len(objects) + len(prefixes) >= max_keys:
                return objects, prefixes, last
            rest = key[len(prefix) :]
            if delimiter and delimiter in rest:
                common = prefix + rest.split(delimiter, 1)[0] + delimiter
                prefixes.append(common)
                last = common
                # skip every key under this common prefix
                index = bisect.bisect_left(self._keys, common + "\U0010ffff")
                continue
            objects.append((key, self._objects[key]))
            last = key
            index += 1
        return objects, prefixes, None

    def list(
        self, prefix: str, after: str, delimiter: str, max_keys: int
    ) -> tuple[list[tuple[str, S3Object]], list[str], str | None]:
        """Keys under ``prefix`` after ``after``: (objects, common prefixes, the last key
        returned when there are more)."""
        with self._lock:
            objects, prefixes, more = self._list_locked(prefix, after, delimiter, max_keys)
            self._lists += 1
            self._listed_keys += len(objects) + len(prefixes)
        return objects, prefixes, more


def _etag_matches(condition: str, etag: str) -> bool:
    wanted = {part.strip() for part in condition.split(",")}
    return "*" in wanted or etag in wanted or etag.strip('"') in wanted


def _iso(modified_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(modified_s)) + (
        f".{int(modified_s * 1000) % 1000:03d}Z"
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the object store pools its connections
    server_version = "streamtrain-s3"
    store: S3Store
    bucket: str

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would flood the broker's log

    # -- helpers -----------------------------------------------------------------------

    def _target(self) -> tuple[str, str, dict[str, str]]:
        """(bucket, key, query) of a path-style request."""
        parsed = urllib.parse.urlsplit(self.path)
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        return urllib.parse.unquote(bucket), urllib.parse.unquote(key), query

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

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
        bucket, key, _ = self._target()
        body = self._body()
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
        self._get(head=False)

    def do_HEAD(self) -> None:
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
                self._list(query)
            return
        stored = self.store.get(key)
        if stored is None:
            self._error(404, "NoSuchKey", f"no key {key!r}", head=head)
            return
        if_match, if_none_match = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        if if_match is not None and not _etag_matches(if_match, stored.etag):
            self._error(412, "PreconditionFailed", "If-Match", head=head)
            return
        if if_none_match is not None and _etag_matches(if_none_match, stored.etag):
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
        bucket, key, _ = self._target()
        if self._bucket_ok(bucket):
            self.store.delete(key)
            self._reply(204)

    def do_POST(self) -> None:
        bucket, _, query = self._target()
        body = self._body()
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
        after = query.get("continuation-token") or query.get("start-after") or ""
        max_keys = min(MAX_KEYS, int(query.get("max-keys") or MAX_KEYS))
        objects, prefixes, more = self.store.list(prefix, after, delimiter, max_keys)
        parts = [
            f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{_XMLNS}">',
            f"<Name>{escape(self.bucket)}</Name><Prefix>{escape(prefix)}</Prefix>",
            f"<KeyCount>{len(objects) + len(prefixes)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>",
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>",
        ]
        if more is not None:
            parts.append(f"<NextContinuationToken>{escape(more)}</NextContinuationToken>")
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


def serve(host: str, port: int, bucket: str) -> ThreadingHTTPServer:
    """A server (not yet serving: call ``serve_forever``) on ``host:port`` for ``bucket``.

    Loopback only: it checks no request signature, so ``host`` must be a loopback
    address (:class:`~streamtrain.errors.ConfigError` otherwise)."""
    if not is_loopback(host):
        raise ConfigError(
            f"the local S3 server checks no credentials and binds loopback only, not {host!r}"
        )
    handler = type("Handler", (_Handler,), {"store": S3Store(), "bucket": bucket})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bucket", required=True)
    args = parser.parse_args()
    server = serve(args.host, args.port, args.bucket)
    print(f"serving s3://{args.bucket}/ at http://{args.host}:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
