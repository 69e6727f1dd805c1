"""Running the KEDA scaler: the gRPC server, its TLS, the plan feed and ``/metrics``.

Owned here: :class:`ScalerSettings` (what ``streamtrain keda serve`` configures) and
:func:`serve`, which reads the plans (:class:`~streamtrain.keda.feed.PlanFeed`), serves
:class:`~streamtrain.keda.service.ScalerService` on ``host:port`` and the scaler's
Prometheus metrics on ``metrics_host:metrics_port`` until ``stop`` is set, then stops
everything it started.

Security: the gRPC port listens on 127.0.0.1 unless told otherwise. TLS is an option
(``tls_cert`` + ``tls_key``); with ``tls_client_ca`` clients must present a certificate
signed by that CA (KEDA's ``tlsClientCert``/``tlsClientKey``). Anything listening beyond
loopback must authenticate its callers, so a non-loopback ``host`` needs all three.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, StreamtrainError
from streamtrain.keda.feed import FeedSettings, PlanFeed
from streamtrain.keda.plans import PlanBook, PlanSettings
from streamtrain.ports import is_loopback

__all__ = ["Listening", "ScalerSettings", "is_loopback", "serve"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalerSettings:
    host: str = "127.0.0.1"
    port: int = 6068  # 0: a free one
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = 6069  # None: no /metrics; 0: a free port
    jobs: tuple[str, ...] = ()  # the jobs served; empty: every job the topics name
    feed: FeedSettings = field(default_factory=FeedSettings)
    # a plan whose planner was not heard for max_plan_age_s is refused (UNAVAILABLE):
    # three of the planner's decision intervals (60 s by default), twelve heartbeats
    plans: PlanSettings = field(default_factory=lambda: PlanSettings(max_plan_age_s=180.0))
    grace_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ConfigError(f"the gRPC port must be in 0..65535, got {self.port}")
        if self.metrics_port is not None and not 0 <= self.metrics_port < 65536:
            raise ConfigError(f"the metrics port must be in 0..65535, got {self.metrics_port}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("TLS needs both --tls-cert and --tls-key")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key (TLS first)")
        if not is_loopback(self.host) and self.tls_client_ca is None:
            raise ConfigError(
                f"listening on {self.host} (beyond loopback) needs its callers authenticated: "
                "give --tls-cert, --tls-key and --tls-client-ca (KEDA presents the client "
                "certificate of its TriggerAuthentication: tlsClientCert, tlsClientKey, caCert)"
            )
        for path in (self.tls_cert, self.tls_key, self.tls_client_ca):
            if path is not None and not path.is_file():
                raise ConfigError(f"TLS file {path} does not exist")

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


@dataclass(frozen=True, slots=True)
class Listening:
    """Where a started scaler answers (given to ``on_listening``)."""

    address: str  # host:port of the gRPC server
    port: int
    tls: bool
    metrics_url: str | None


def _credentials(settings: ScalerSettings) -> Any:
    import grpc

    if settings.tls_cert is None or settings.tls_key is None:
        raise ConfigError("TLS needs both --tls-cert and --tls-key")
    ca = settings.tls_client_ca
    return grpc.ssl_server_credentials(
        [(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())],
        root_certificates=ca.read_bytes() if ca is not None else None,
        require_client_auth=ca is not None,
    )


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


async def serve(
    kafka: KafkaSettings,
    settings: ScalerSettings,
    stop: asyncio.Event,
    *,
    on_listening: Callable[[Listening], None] | None = None,
) -> None:
    """Serve until ``stop`` is set (module docstring); a failing feed ends it with its error."""
    import grpc
    from prometheus_client import CollectorRegistry, start_http_server

    from streamtrain.keda.metrics import ScalerCollector
    from streamtrain.keda.service import ScalerService
    from streamtrain.proto.externalscaler_pb2_grpc import add_ExternalScalerServicer_to_server

    book = PlanBook(settings.jobs, settings.plans)
    feed = PlanFeed(kafka, book, settings.feed)
    service = ScalerService(book, ready=lambda: feed.ready, not_ready=feed.catch_up_note)
    feed.on_change = service.notify
    await asyncio.to_thread(feed.start)
    with contextlib.ExitStack() as stack:
        stack.callback(feed.close)
        server = grpc.aio.server()
        add_ExternalScalerServicer_to_server(service, server)  # type: ignore[no-untyped-call]
        address = _address(settings.host, settings.port)
        try:
            if settings.tls:
                port = server.add_secure_port(address, _credentials(settings))
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise ConfigError(f"cannot listen on {address}: {exc} (choose another --port)") from exc
        if port == 0:
            raise ConfigError(f"cannot listen on {address} (in use? choose another --port)")
        await server.start()
        metrics_url = None
        if settings.metrics_port is not None:
            registry = CollectorRegistry()
            registry.register(ScalerCollector(service, feed))
            try:
                http, _ = start_http_server(
                    settings.metrics_port, addr=settings.metrics_host, registry=registry
                )
            except OSError as exc:
                await server.stop(None)
                raise ConfigError(
                    f"cannot serve /metrics on {settings.metrics_host}:{settings.metrics_port}: "
                    f"{exc} (choose another --metrics-port)"
                ) from exc
            stack.callback(http.server_close)
            stack.callback(http.shutdown)
            metrics_url = f"http://{_address(settings.metrics_host, http.server_port)}/metrics"
        listening = Listening(_address(settings.host, port), port, settings.tls, metrics_url)
        log.info("KEDA external scaler at %s (TLS: %s)", listening.address, settings.tls)
        if on_listening is not None:
            on_listening(listening)
        reading = asyncio.create_task(feed.run(stop), name="streamtrain-keda-feed")
        watching = asyncio.create_task(_watch_stale(service, stop), name="streamtrain-keda-stale")
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()
            await server.stop(settings.grace_s)
            await asyncio.wait({reading, watching, stopping})
        if reading.exception() is not None:
            error = reading.exception()
            if isinstance(error, StreamtrainError):
                raise error
            raise StreamtrainError(f"reading the plans failed: {error}") from error


async def _watch_stale(service: Any, stop: asyncio.Event, every_s: float = 1.0) -> None:
    """Say in the log when a job's plan goes stale or fresh again (ScalerService.check_stale)."""
    while not stop.is_set():
        service.check_stale()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
