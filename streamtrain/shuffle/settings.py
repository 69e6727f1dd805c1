"""Frozen settings of the shuffle layer: policy, watermarks, batching, credit, CURVE keys.

Owned here: :class:`CurveKeys` (a worker's ZeroMQ CURVE key pair, Z85),
:class:`ShuffleSettings` (everything one worker's ShuffleUnit, ForwardingUnit and Kafka
membership need, validated once so the running code never checks again) and
:func:`check_heartbeat` (the membership heartbeat's one rule). The policy itself is
:class:`~streamtrain.shuffle.policy.ShufflePolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtrain.errors import ConfigError
from streamtrain.shuffle.announcements import (
    curve_key_problem,
    endpoint_problem,
    is_loopback,
    is_wildcard,
    worker_id_problem,
)
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.units import ms_to_s

__all__ = ["CurveKeys", "ShuffleSettings", "check_heartbeat"]


def check_heartbeat(interval_ms: int, timeout_ms: int) -> None:
    """Membership needs ``0 < interval < timeout``; raise :class:`ConfigError` otherwise."""
    if interval_ms <= 0 or timeout_ms <= interval_ms:
        raise ConfigError(
            "membership needs 0 < heartbeat interval < heartbeat timeout, got "
            f"{interval_ms} ms and {timeout_ms} ms"
        )


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """A ZeroMQ CURVE key pair in Z85 (40 ASCII bytes each)."""

    public_key: bytes
    secret_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        for key in (self.public_key, self.secret_key):
            problem = curve_key_problem(key)
            if problem is not None:
                raise ConfigError(f"CURVE keys must be Z85 (see zmq.curve_keypair()): {problem}")

    @classmethod
    def generate(cls) -> CurveKeys:
        import zmq  # here, so the settings (and the pure ShuffleUnit) load no ZeroMQ

        public, secret = zmq.curve_keypair()
        return cls(public, secret)


@dataclass(frozen=True, slots=True)
class ShuffleSettings:
    """One worker's shuffle configuration.

    Queue sizes are in records. A worker accepts forwarded records while its local
    queue is below ``low_watermark_records``, refuses once it passes
    ``high_watermark_records`` and accepts again only below the low watermark. Records
    read locally that do not fit into ``queue_capacity_records`` go to an overflow
    buffer of at most ``overflow_capacity_records``, which the ForwardingUnit drains in
    batches of at most ``batch_records``. A receiver lets each sender have at most
    ``credit_window_records`` un-acknowledged records; a forwarded batch its receiver
    has not queued within ``ack_timeout_ms`` is re-routed or trained locally. With Kafka
    membership a worker renews its ``<job>.members`` record every
    ``heartbeat_interval_ms`` and counts a peer gone after ``heartbeat_timeout_ms``.

    Once a receiver said it queued a batch, the batch waits for its trainer as long as
    the receiver keeps talking (its state events come every ``state_rebroadcast_ms``),
    up to ``max_queued_ms``; a receiver silent for ``ack_timeout_ms`` has its batches
    re-routed.

    The sockets bind ``host`` (a port of 0 picks a free one) and are announced to peers
    at ``advertise_host`` (default: ``host``; required when ``host`` is a wildcard such
    as ``0.0.0.0``, which peers cannot connect to). Beyond loopback the shuffle must
    authenticate: ``curve`` keys are required whenever ``host`` is not a loopback
    address. No frame larger than ``max_frame_bytes`` is accepted, and none is sent: a
    batch is cut to fit. ``topics`` are the topics the job reads (a peer's batch of any
    other topic is refused; empty: any).
    """

    job: str
    worker_id: str
    policy: ShufflePolicy = ShufflePolicy.ADVANCED
    queue_capacity_records: int = 10_000
    low_watermark_records: int = 2_000
    high_watermark_records: int = 8_000
    overflow_capacity_records: int = 50_000
    batch_records: int = 1_000
    credit_window_records: int = 8_000
    ack_timeout_ms: int = 10_000
    state_rebroadcast_ms: int = 1_000
    heartbeat_interval_ms: int = 1_000
    heartbeat_timeout_ms: int = 5_000
    max_queued_ms: int = 300_000
    host: str = "127.0.0.1"
    advertise_host: str | None = None
    data_port: int = 0
    event_port: int = 0
    curve: CurveKeys | None = None
    max_frame_bytes: int = 64 * 1024 * 1024
    topics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.job:
            raise ConfigError("shuffle settings need a job name")
        problem = worker_id_problem(self.worker_id)
        if problem is not None:
            raise ConfigError(f"shuffle settings: {problem}")
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "policy", ShufflePolicy(self.policy))
        if not 0 < self.low_watermark_records <= self.high_watermark_records:
            raise ConfigError(
                f"watermarks must satisfy 0 < low <= high, got low="
                f"{self.low_watermark_records} high={self.high_watermark_records}"
            )
        if self.high_watermark_records > self.queue_capacity_records:
            raise ConfigError(
                f"high watermark {self.high_watermark_records} exceeds the queue capacity "
                f"{self.queue_capacity_records} records"
            )
        positive = {
            "overflow_capacity_records": self.overflow_capacity_records,
            "batch_records": self.batch_records,
            "credit_window_records": self.credit_window_records,
            "ack_timeout_ms": self.ack_timeout_ms,
            "state_rebroadcast_ms": self.state_rebroadcast_ms,
            "max_queued_ms": self.max_queued_ms,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        if self.batch_records > self.credit_window_records:
            raise ConfigError(
                f"batch_records {self.batch_records} exceeds credit_window_records "
                f"{self.credit_window_records}: no batch could ever be sent"
            )
        if self.state_rebroadcast_ms >= self.ack_timeout_ms:
            raise ConfigError(
                f"state_rebroadcast_ms {self.state_rebroadcast_ms} must be below "
                f"ack_timeout_ms {self.ack_timeout_ms}: peers take a receiver silent for "
                "the ACK timeout as gone"
            )
        if self.max_queued_ms < self.ack_timeout_ms:
            raise ConfigError(
                f"max_queued_ms {self.max_queued_ms} must be at least ack_timeout_ms "
                f"{self.ack_timeout_ms}"
            )
        if self.max_frame_bytes < 64 * 1024:
            raise ConfigError(
                f"max_frame_bytes must be at least 64 KiB, got {self.max_frame_bytes}"
            )
        check_heartbeat(self.heartbeat_interval_ms, self.heartbeat_timeout_ms)
        for name, port in (("data_port", self.data_port), ("event_port", self.event_port)):
            if not 0 <= port < 65536:
                raise ConfigError(f"{name} {port} is outside 0-65535 (0 picks a free port)")
        if self.data_port and self.data_port == self.event_port:
            raise ConfigError(f"data_port and event_port are both {self.data_port}")
        self._check_addresses()

    def _check_addresses(self) -> None:
        if not self.host.strip():
            raise ConfigError("the shuffle host must not be empty (0.0.0.0 binds every interface)")
        if self.advertise_host is None and is_wildcard(self.host):
            raise ConfigError(
                f"the shuffle binds the wildcard {self.host!r}, which peers cannot connect "
                "to: set the address peers reach this worker at (advertise_host, "
                "--shuffle-advertise-host)"
            )
        problem = endpoint_problem(f"tcp://{self.announced_host}:1")
        if problem is not None:
            raise ConfigError(f"the shuffle cannot announce itself: {problem}")
        if self.curve is None and not is_loopback(self.host):
            raise ConfigError(
                f"the shuffle binds {self.host!r}, beyond loopback, so it must authenticate "
                "its peers: give it CURVE keys (--shuffle-curve; a key pair per run is the "
                "default off loopback)"
            )

    @property
    def ack_timeout_s(self) -> float:
        return ms_to_s(self.ack_timeout_ms)

    @property
    def max_queued_s(self) -> float:
        return ms_to_s(self.max_queued_ms)

    @property
    def bind_host(self) -> str:
        """``host`` as a ZeroMQ endpoint wants it (IPv6 literals in brackets)."""
        return _bracketed(self.host.strip())

    @property
    def announced_host(self) -> str:
        """The host peers connect to: ``advertise_host``, else ``host``."""
        return _bracketed((self.advertise_host or self.host).strip())


def _bracketed(host: str) -> str:
    if is_wildcard(host) and ":" not in host:
        return host
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host
