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
from streamtrain.shuffle.policy import ShufflePolicy

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
        if len(self.public_key) != 40 or len(self.secret_key) != 40:
            raise ConfigError("CURVE keys must be 40-byte Z85 strings (see zmq.curve_keypair())")

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
    ``credit_window_records`` un-acknowledged records; a forwarded batch not
    acknowledged within ``ack_timeout_ms`` is re-routed or trained locally. With Kafka
    membership a worker renews its ``<job>.members`` record every
    ``heartbeat_interval_ms`` and counts a peer gone after ``heartbeat_timeout_ms``.
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
    host: str = "127.0.0.1"
    data_port: int = 0
    event_port: int = 0
    curve: CurveKeys | None = None

    def __post_init__(self) -> None:
        if not self.job or not self.worker_id:
            raise ConfigError("shuffle settings need a job name and a worker id")
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
        }
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        if self.batch_records > self.credit_window_records:
            raise ConfigError(
                f"batch_records {self.batch_records} exceeds credit_window_records "
                f"{self.credit_window_records}: no batch could ever be sent"
            )
        check_heartbeat(self.heartbeat_interval_ms, self.heartbeat_timeout_ms)
        for name, port in (("data_port", self.data_port), ("event_port", self.event_port)):
            if not 0 <= port < 65536:
                raise ConfigError(f"{name} {port} is outside 0-65535 (0 picks a free port)")

    @property
    def ack_timeout_s(self) -> float:
        return self.ack_timeout_ms / 1000.0
