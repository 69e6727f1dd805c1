"""What a request must be before the local S3 server serves it (pure: no sockets).

Owned here:

* **Framing and queries**, refused with HTTP 400 (:class:`BadRequest`) rather than a
  dropped connection or a handler thread blocked on a body that never comes:
  :func:`content_length` (a number, not negative, at most :data:`MAX_BODY_BYTES`, else
  413; no ``Transfer-Encoding``), :func:`max_keys` (a number in ``0..1000``) and the
  list pages' continuation tokens (:func:`encode_token` / :func:`decode_token`: opaque,
  naming where the page ended, a key or a common prefix).
* **Only the broker's requests** (HTTP 403): :func:`host_problem` wants a loopback
  ``Host`` (a page of a DNS-rebinding site names its own host), and
  :func:`signature_problem` an AWS Signature Version 4 ``Authorization`` header made
  with the run's own credentials (:class:`Credentials`, random per server), as Tansu's
  object store signs every request. A browser page cannot make one: a cross-origin
  request with an ``Authorization`` header needs a CORS preflight the server never
  allows, and it does not know the secret anyway. ``x-amz-date`` must be within
  :data:`MAX_CLOCK_SKEW_S` of now, and a signed payload hash must be the body's
  (:func:`payload_problem`). :func:`sign` makes such a header (the server's own client
  and the tests use it).
"""

from __future__ import annotations

import base64
import binascii
import calendar
import hashlib
import hmac
import secrets
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from streamtrain.ports import is_loopback
from streamtrain.s3local.store import Cursor

__all__ = [
    "ACCESS_KEY_ENV",
    "MAX_BODY_BYTES",
    "MAX_CLOCK_SKEW_S",
    "MAX_KEYS",
    "SECRET_KEY_ENV",
    "STATS_PATH",
    "BadRequest",
    "Credentials",
    "content_length",
    "decode_token",
    "encode_token",
    "host_problem",
    "max_keys",
    "payload_problem",
    "sign",
    "signature_problem",
]

MAX_KEYS = 1000
STATS_PATH = "/-stats"  # GET: the store's S3Stats as JSON; needs only a loopback Host
ACCESS_KEY_ENV = "STREAMTRAIN_S3_ACCESS_KEY_ID"  # the server's credentials, from its parent
SECRET_KEY_ENV = "STREAMTRAIN_S3_SECRET_ACCESS_KEY"  # noqa: S105 - a variable's name
MAX_BODY_BYTES = 256 * 1024 * 1024  # Tansu writes record batches: far less
MAX_CLOCK_SKEW_S = 900.0  # AWS's own window for x-amz-date
_ALGORITHM = "AWS4-HMAC-SHA256"
_UNSIGNED = ("UNSIGNED-PAYLOAD", "STREAMING-")


class Headers(Protocol):
    """A request's headers, looked up by name (``http.server``'s, or a dict)."""

    def get(self, name: str, /) -> str | None: ...


class BadRequest(Exception):
    """A request the server answers with ``status`` and an S3 error ``code``."""

    def __init__(self, message: str, *, status: int = 400, code: str = "InvalidArgument"):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    region: str = "us-east-1"

    @classmethod
    def random(cls, region: str = "us-east-1") -> Credentials:
        """Fresh credentials for one server and its client (never written anywhere)."""
        return cls(f"ST{secrets.token_hex(8).upper()}", secrets.token_urlsafe(30), region)


# -- framing and queries ---------------------------------------------------------------


def content_length(headers: Headers) -> int:
    """The body's length from the headers (0 without one); :class:`BadRequest` if unusable."""
    if headers.get("Transfer-Encoding") is not None:
        raise BadRequest("Transfer-Encoding is not supported: send Content-Length")
    text = headers.get("Content-Length")
    if text is None or not text.strip():
        return 0
    if not text.strip().isdigit():  # no sign, no spaces inside, no "1e3"
        raise BadRequest(f"Content-Length {text[:40]!r} is not a non-negative number")
    length = int(text)
    if length > MAX_BODY_BYTES:
        raise BadRequest(
            f"a body of {length} bytes is more than {MAX_BODY_BYTES}",
            status=413,
            code="EntityTooLarge",
        )
    return length


def max_keys(query: Mapping[str, str]) -> int:
    text = query.get("max-keys")
    if text is None or text == "":
        return MAX_KEYS
    if not text.isdigit():
        raise BadRequest(f"max-keys {text[:40]!r} is not a non-negative number")
    return min(MAX_KEYS, int(text))


def encode_token(cursor: Cursor) -> str:
    """An opaque continuation token for where a page ended."""
    marked = ("p" if cursor.common_prefix else "k") + cursor.key
    return base64.urlsafe_b64encode(marked.encode()).decode()


def decode_token(token: str) -> Cursor:
    """The :class:`Cursor` of a token made by :func:`encode_token`; :class:`BadRequest`
    for anything else."""
    try:
        text = base64.urlsafe_b64decode(token.encode("ascii")).decode()
    except (ValueError, binascii.Error) as exc:
        raise BadRequest("the continuation token is not one this server gave") from exc
    if not text or text[0] not in "kp":
        raise BadRequest("the continuation token is not one this server gave")
    return Cursor(text[1:], common_prefix=text[0] == "p")


# -- whose request it is ---------------------------------------------------------------


def host_problem(host_header: str | None) -> str | None:
    """Why a ``Host`` header is not one of this loopback server's, or None."""
    if not host_header:
        return "no Host header"
    host = host_header.strip()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if not is_loopback(host):
        return f"Host {host_header[:80]!r} is not a loopback address"
    return None


def _uri_encode(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def _canonical_query(raw_query: str) -> str:
    pairs = []
    for part in raw_query.split("&") if raw_query else ():
        key, _, value = part.partition("=")
        pairs.append(
            (_uri_encode(urllib.parse.unquote(key)), _uri_encode(urllib.parse.unquote(value)))
        )
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _header(headers: Headers, name: str) -> str:
    return " ".join((headers.get(name) or "").split())


def _signature(
    method: str,
    raw_path: str,
    headers: Headers,
    signed: list[str],
    amz_date: str,
    scope: str,
    secret: str,
) -> str:
    path, _, query = raw_path.partition("?")
    canonical = "\n".join(
        [
            method,
            path or "/",
            _canonical_query(query),
            "".join(f"{name}:{_header(headers, name)}\n" for name in signed),
            ";".join(signed),
            _header(headers, "x-amz-content-sha256") or "UNSIGNED-PAYLOAD",
        ]
    )
    to_sign = "\n".join(
        [_ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _amz_time_s(amz_date: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))
    except ValueError:
        return None


def signature_problem(
    method: str,
    raw_path: str,
    headers: Headers,
    credentials: Credentials,
    now_s: float,
) -> str | None:
    """Why a request is not signed with ``credentials`` (Signature Version 4), or None."""
    authorization = headers.get("Authorization")
    if not authorization:
        return "no Authorization header: only signed requests are served"
    algorithm, _, rest = authorization.strip().partition(" ")
    fields = dict(item.strip().partition("=")[::2] for item in rest.split(",") if "=" in item)
    credential, signed_text, given = (
        fields.get(k, "") for k in ("Credential", "SignedHeaders", "Signature")
    )
    key_id, _, scope = credential.partition("/")
    signed = signed_text.split(";") if signed_text else []
    amz_date = _header(headers, "x-amz-date")
    at_s = _amz_time_s(amz_date)
    if algorithm != _ALGORITHM or not (key_id and scope and signed and given):
        return "the Authorization header is not an AWS Signature Version 4"
    if not hmac.compare_digest(key_id, credentials.access_key_id):
        return "an access key this server does not know"
    if "host" not in signed or "x-amz-date" not in signed or at_s is None:
        return "the signature does not cover Host and x-amz-date"
    if abs(now_s - at_s) > MAX_CLOCK_SKEW_S or not scope.startswith(amz_date[:8] + "/"):
        return f"x-amz-date {amz_date!r} is not within {MAX_CLOCK_SKEW_S:g} s of now"
    expected = _signature(
        method, raw_path, headers, signed, amz_date, scope, credentials.secret_access_key
    )
    if not hmac.compare_digest(expected, given):
        return "the signature does not match"
    return None


def payload_problem(headers: Headers, body: bytes) -> str | None:
    """Why the body is not the one whose hash was signed, or None."""
    claimed = _header(headers, "x-amz-content-sha256")
    if not claimed or claimed.startswith(_UNSIGNED):
        return None
    if not hmac.compare_digest(claimed, hashlib.sha256(body).hexdigest()):
        return "the body does not match its signed x-amz-content-sha256"
    return None


def sign(
    method: str,
    raw_path: str,
    host: str,
    body: bytes,
    credentials: Credentials,
    now_s: float | None = None,
) -> dict[str, str]:
    """The headers that sign a request (``raw_path`` as sent, its query included)."""
    at = time.gmtime(time.time() if now_s is None else now_s)
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", at)
    scope = f"{amz_date[:8]}/{credentials.region}/s3/aws4_request"
    headers = {
        "host": host,
        "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
        "x-amz-date": amz_date,
    }
    signed = sorted(headers)
    signature = _signature(
        method, raw_path, headers, signed, amz_date, scope, credentials.secret_access_key
    )
    headers["Authorization"] = (
        f"{_ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return headers
