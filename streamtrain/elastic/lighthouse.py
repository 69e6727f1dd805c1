"""torchft's lighthouse: the process that forms a quorum of a job's workers every step.

Owned here: :class:`LighthouseSettings` (loopback by default; another address only with
``trusted_network``: the lighthouse authenticates nobody, and its page can tell
managers to exit), :func:`serve` (run torchft's ``LighthouseServer`` in this process
until told to stop: ``streamtrain lighthouse``), :class:`LighthouseProcess` (the control
side starts ``streamtrain lighthouse`` as a child and stops it with
:func:`~streamtrain.process.stop_child`), and :func:`wait_reachable` (a worker's check
at start: :class:`~streamtrain.errors.LighthouseUnreachableError` naming the address).

The heartbeat timeout is lower than torchft's 5 s: it is how long a worker that left
(killed, or drained and gone) still holds up the next quorum of the others. Measured on
a 2-core machine: a graceful leave paused the others 5.1 s with 5,000 ms, 1.1 s with
1,000 ms (docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit

from streamtrain.elastic.settings import DEFAULT_LIGHTHOUSE_PORT, lighthouse_url
from streamtrain.errors import ConfigError, ElasticError, LighthouseUnreachableError
from streamtrain.ports import is_loopback
from streamtrain.process import die_with_parent_preexec, stop_child

__all__ = ["LighthouseProcess", "LighthouseSettings", "ready_line", "serve", "wait_reachable"]

log = logging.getLogger(__name__)

_READY_PREFIX = "lighthouse at "


@dataclass(frozen=True, slots=True)
class LighthouseSettings:
    """Where the lighthouse listens and how it forms quorums (torchft's own flags).

    ``min_replicas``: workers needed for a quorum; ``join_timeout_ms``: how long a
    quorum waits for workers that heartbeat but have not asked to join;
    ``heartbeat_timeout_ms``: after how long without a heartbeat a worker is gone.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_LIGHTHOUSE_PORT
    min_replicas: int = 1
    join_timeout_ms: int = 1_000
    heartbeat_timeout_ms: int = 500
    quorum_tick_ms: int = 20
    trusted_network: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ConfigError(f"lighthouse port must be in 0..65535, got {self.port}")
        if self.min_replicas < 1:
            raise ConfigError(f"min_replicas must be at least 1, got {self.min_replicas}")
        for name in ("join_timeout_ms", "heartbeat_timeout_ms", "quorum_tick_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if not is_loopback(self.host) and not self.trusted_network:
            raise ConfigError(
                f"refusing to run the lighthouse on {self.host}: it authenticates nobody and "
                "its page can tell workers to exit; bind it to loopback, or pass "
                "--trusted-network on a network you trust"
            )

    @property
    def bind(self) -> str:
        host = self.host.strip("[]")
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def serve(
    settings: LighthouseSettings,
    stop: threading.Event,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Run the lighthouse in this process until ``stop`` is set; ``on_ready`` gets its
    address (``http://host:port``)."""
    from torchft.coordination import LighthouseServer

    try:
        server = LighthouseServer(
            bind=settings.bind,
            min_replicas=settings.min_replicas,
            join_timeout_ms=settings.join_timeout_ms,
            quorum_tick_ms=settings.quorum_tick_ms,
            heartbeat_timeout_ms=settings.heartbeat_timeout_ms,
        )
    except RuntimeError as exc:
        raise ElasticError(f"the lighthouse cannot listen on {settings.bind}: {exc}") from exc
    try:
        port = int(server.address().rsplit(":", 1)[1].strip("/"))
        address = lighthouse_url(f"{settings.bind.rsplit(':', 1)[0]}:{port}")
        log.info("lighthouse at %s (min replicas %d)", address, settings.min_replicas)
        if on_ready is not None:
            on_ready(address)
        stop.wait()
    finally:
        server.shutdown()


def wait_reachable(address: str, timeout_s: float) -> None:
    """Return once the lighthouse at ``address`` accepts a TCP connection; else raise
    :class:`LighthouseUnreachableError` after ``timeout_s``."""
    url = urlsplit(lighthouse_url(address))
    host, port = url.hostname, url.port
    if host is None or port is None:
        raise ConfigError(f"lighthouse address {address!r} is not HOST:PORT")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(1.0, timeout_s)):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise LighthouseUnreachableError(lighthouse_url(address), timeout_s) from None
            time.sleep(0.2)


class LighthouseProcess:
    """``streamtrain lighthouse`` as a child process of the control side."""

    def __init__(
        self,
        settings: LighthouseSettings,
        *,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.settings = settings
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.address: str | None = None

    def argv(self) -> list[str]:
        s = self.settings
        argv = [
            sys.executable, "-m", "streamtrain", "lighthouse",
            "--host", s.host,
            "--port", str(s.port),
            "--min-replicas", str(s.min_replicas),
            "--join-timeout-ms", str(s.join_timeout_ms),
            "--heartbeat-timeout-ms", str(s.heartbeat_timeout_ms),
            "--quorum-tick-ms", str(s.quorum_tick_ms),
        ]  # fmt: skip
        return [*argv, "--trusted-network"] if s.trusted_network else argv

    def start(self) -> str:
        """Start the child and return its address once it listens."""
        log_file = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                self.argv(),
                stdout=subprocess.PIPE,
                stderr=log_file if log_file is not None else subprocess.DEVNULL,
                preexec_fn=die_with_parent_preexec(signal.SIGTERM),
            )
        finally:
            if log_file is not None:
                log_file.close()
        self.address = self._read_address()
        return self.address

    def _read_address(self) -> str:
        assert self.process is not None and self.process.stdout is not None  # noqa: S101
        found: list[str] = []

        def read() -> None:
            assert self.process is not None and self.process.stdout is not None  # noqa: S101
            for raw in self.process.stdout:
                line = raw.decode(errors="replace").strip()
                if line.startswith(_READY_PREFIX):
                    found.append(line[len(_READY_PREFIX) :])
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.startup_timeout_s)
        if not found:
            self.stop()
            raise ElasticError(
                f"the lighthouse did not start on {self.settings.bind} within "
                f"{self.startup_timeout_s:g} s (port taken? see its log)"
            )
        return found[0]

    def stop(self) -> int | None:
        """Stop the child (SIGTERM, then SIGKILL after ``stop_timeout_s``); its exit code."""
        if self.process is None:
            return None
        code = stop_child(self.process, "the lighthouse", self.stop_timeout_s)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None
        return code

    def __enter__(self) -> LighthouseProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def ready_line(address: str) -> str:
    """The line ``streamtrain lighthouse`` prints once it listens."""
    return f"{_READY_PREFIX}{address}"
