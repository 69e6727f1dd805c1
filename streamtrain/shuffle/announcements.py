"""What a worker may announce to its peers: endpoints, CURVE keys, heartbeat fields.

Owned here, as pure functions (no sockets, no Kafka; each returns why a value is
unusable, or ``None``):

* :func:`endpoint_problem`: a peer's ZeroMQ endpoint must be ``tcp://HOST:PORT`` with a
  concrete host (an IP literal or a DNS name; not a wildcard such as ``*`` or
  ``0.0.0.0``, which a peer cannot connect to) and a port in 1-65535. Anything else
  would make ``connect()`` raise on the forwarding thread, or connect nowhere.
* :func:`curve_key_problem`: a CURVE public key is 40 characters of Z85 that decode to
  32 bytes.
* :func:`heartbeat_problem`: a membership record's heartbeat time must not lie in the
  future beyond the allowed clock skew, and its interval must be positive and at most
  the reader's own heartbeat timeout (a record cannot choose its own expiry: a far
  future heartbeat or a huge interval would keep a dead worker "live" for months).
* :func:`is_loopback` and :func:`is_wildcard`: what a bind host means for security
  (authentication is required beyond loopback) and for announcing (a wildcard bind
  needs an address peers can reach).
* :func:`worker_id_problem`: a worker id must fit into a ZeroMQ routing id together
  with its connection nonce, and may not contain NUL (the separator).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from streamtrain.ports import is_loopback
from streamtrain.units import ms_to_s

__all__ = [
    "MAX_WORKER_ID_BYTES",
    "curve_key_problem",
    "endpoint_problem",
    "heartbeat_problem",
    "is_loopback",
    "is_wildcard",
    "worker_id_problem",
]

MAX_WORKER_ID_BYTES: Final = 200
"""A routing id holds at most 255 bytes: the worker id, a NUL and a 16-byte nonce."""

_Z85: Final = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_VALUE: Final = {ord(c): i for i, c in enumerate(_Z85)}
_HOSTNAME: Final = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)
_WILDCARDS: Final = frozenset({"*", "0.0.0.0", "::", "[::]", ""})  # noqa: S104 - not a bind


def is_wildcard(host: str) -> bool:
    """``*``, ``0.0.0.0`` or ``::``: binds every interface, reachable at none of them by
    that name."""
    return host.strip() in _WILDCARDS


def _host_problem(host: str) -> str | None:
    if is_wildcard(host):
        return f"host {host!r} is a wildcard, which a peer cannot connect to"
    if host.startswith("["):
        if not host.endswith("]"):
            return f"host {host!r} is not a bracketed IPv6 address"
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"host {host!r} is not an IPv6 address"
        return None
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        pass
    else:
        return None
    if _HOSTNAME.match(host) is None or host.replace(".", "").isdigit():
        return f"host {host!r} is neither an IP address nor a DNS name"
    return None


def endpoint_problem(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be connected to, or ``None`` (see the module docstring)."""
    if not endpoint.startswith("tcp://"):
        return f"{endpoint!r} is not a tcp:// endpoint"
    rest = endpoint[len("tcp://") :]
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        return f"{endpoint!r} has no host:port"
    problem = _host_problem(host)
    if problem is not None:
        return f"{endpoint!r}: {problem}"
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"{endpoint!r}: port {port!r} is not in 1-65535"
    return None


def curve_key_problem(key: bytes) -> str | None:
    """Why ``key`` is not a Z85 CURVE public key (40 characters, 32 bytes), or ``None``."""
    if len(key) != 40:
        return f"a CURVE key has 40 Z85 characters, this one {len(key)}"
    for start in range(0, 40, 5):
        value = 0
        for char in key[start : start + 5]:
            digit = _Z85_VALUE.get(char)
            if digit is None:
                return "the CURVE key has characters outside Z85"
            value = value * 85 + digit
        if value >= 1 << 32:
            return "the CURVE key does not decode (a Z85 group overflows 32 bits)"
    return None


def heartbeat_problem(
    heartbeat_at_ms: int,
    heartbeat_interval_ms: int,
    *,
    now_ms: int,
    max_skew_ms: int,
    max_interval_ms: int,
) -> str | None:
    """Why a membership heartbeat cannot be believed, or ``None``.

    ``heartbeat_at_ms`` may be at most ``max_skew_ms`` ahead of the reader's clock;
    ``heartbeat_interval_ms`` must be in ``1..max_interval_ms``.
    """
    if heartbeat_at_ms <= 0:
        return "no heartbeat time"
    if heartbeat_at_ms > now_ms + max_skew_ms:
        ahead_s = ms_to_s(heartbeat_at_ms - now_ms)
        return f"heartbeat {ahead_s:.1f} s in the future (clock skew allowed: {max_skew_ms} ms)"
    if not 0 < heartbeat_interval_ms <= max_interval_ms:
        return f"heartbeat interval {heartbeat_interval_ms} ms is not in 1..{max_interval_ms} ms"
    return None


def worker_id_problem(worker_id: str) -> str | None:
    """Why ``worker_id`` cannot name a worker on the shuffle's sockets, or ``None``."""
    if not worker_id:
        return "a worker id must not be empty"
    if "\x00" in worker_id:
        return f"worker id {worker_id!r} contains NUL"
    try:
        encoded = worker_id.encode("utf-8")
    except UnicodeEncodeError:
        return f"worker id {worker_id!r} is not valid UTF-8 text"
    if len(encoded) > MAX_WORKER_ID_BYTES:
        return f"worker id {worker_id[:40]!r}... is longer than {MAX_WORKER_ID_BYTES} bytes"
    return None
