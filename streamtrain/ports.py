"""Loopback ports: is one free, and a free one (the one home of both helpers).

Servers that streamtrain starts (the embedded broker, the local S3 server, the
control app's HTTP port in the demo) pick or check their ports here.
"""

from __future__ import annotations

import socket

__all__ = ["free_port", "port_is_free"]


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
