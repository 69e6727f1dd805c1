"""Loopback ports and hosts: is a port free, a free one, and is a bind host loopback-only
(the one home of these helpers).

Servers that streamtrain starts (the embedded broker, the local S3 server, the
control app's HTTP port in the demo) pick or check their ports here; servers that must
authenticate beyond loopback (the shuffle, the KEDA scaler) or refuse it (the local S3
server) ask :func:`is_loopback`; servers without authentication that may listen beyond
loopback only on a network the user says is trusted (the embedded broker, the control
apps' pages) ask :func:`check_trusted_bind`.
"""

from __future__ import annotations

import ipaddress
import socket

from streamtrain.errors import ConfigError

__all__ = ["check_trusted_bind", "free_port", "is_loopback", "port_is_free"]


def port_is_free(host: str, port: int, *, reuse_address: bool = False) -> bool:
    """True if ``host:port`` can be bound now; ``reuse_address`` as servers that set
    SO_REUSEADDR (aiohttp) see it: connections in TIME_WAIT do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free right now (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only (``127.0.0.0/8``, ``::1``,
    ``localhost``); anything else (a wildcard, a LAN address, a hostname) does not."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_trusted_bind(host: str, *, trusted_network: bool, what: str, flag: str) -> None:
    """:class:`ConfigError` when ``host`` listens beyond loopback for ``what`` (a server
    without authentication) and the user did not say the network is trusted.

    ``flag`` is the option that chose ``host`` (named in the message)."""
    if is_loopback(host) or trusted_network:
        return
    raise ConfigError(
        f"{flag} {host} listens beyond loopback, and {what} has no authentication: anyone "
        "who reaches the port can use it. Keep 127.0.0.1 (put an authenticating proxy in "
        "front), or pass --trusted-network if every host that can reach it may"
    )
