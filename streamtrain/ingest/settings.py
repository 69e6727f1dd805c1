"""Frozen settings of one worker's ingest: what to read, how much to buffer, when to commit.

Owned here: :class:`IngestSettings` and its rendering into confluent-kafka consumer
properties. Commits are always manual (``enable.auto.commit`` and
``enable.auto.offset.store`` off): the offset tracker decides what may be committed.

The fetch properties differ from librdkafka's defaults on purpose, measured with
``benchmarks/ingest.py``: with the default ``fetch.queue.backoff.ms`` (1 s), a consumer
that spends more than a couple of milliseconds per ``consume()`` batch on its own work
finds the pre-fetch queue over its threshold and then waits a whole second for the next
fetch, which cuts throughput several-fold.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from streamtrain.config import AssignmentMode, KafkaSettings
from streamtrain.errors import ConfigError

__all__ = [
    "COLUMN_BUILDERS",
    "FETCH_TUNING",
    "PREFETCH_BYTES_PER_RECORD",
    "ColumnBuilder",
    "IngestSettings",
    "default_worker_id",
]

#: librdkafka fetch properties streamtrain consumers use (and the raw baseline of the
#: benchmark too, so that the comparison measures Python-side work only).
FETCH_TUNING: Mapping[str, Any] = {
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 200_000,
}

PREFETCH_BYTES_PER_RECORD = 256
"""What the default pre-fetch bound allows per record of the local queue: a full
default queue (100,000 records) lets librdkafka hold about 24 MiB."""

ColumnBuilder = Literal["c", "python"]
"""How ingest turns consumed messages into columns (:mod:`streamtrain.ingest.messages`):
``"c"``, the C extension where it is built and works, else the accessors; ``"python"``,
always the accessors."""
COLUMN_BUILDERS: tuple[ColumnBuilder, ...] = ("c", "python")

_OFFSET_RESETS = frozenset({"earliest", "latest", "error"})


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class IngestSettings:
    """One worker's reading of a topic.

    ``group`` is the consumer group (the job). With ``partitions`` empty the worker
    subscribes to ``topics`` as a group member and gets partitions by rebalance; with
    ``partitions`` given it reads exactly those partitions of every topic (no rebalance)
    and still commits under ``group``.

    ``consume_records`` is the ``num_messages`` of each ``consume()`` call;
    ``queue_records`` bounds the local queue between the fetch thread and the trainer
    (fetching pauses when it is full and resumes at half); ``batch_records`` is the
    default training batch. ``max_record_bytes`` larger records go to the dead-letter
    topic ``<topic><dlq_suffix>`` (``dlq_suffix=None``: no dead-letter topic, and an
    undecodable record is an error). ``auto_ack``: a batch is acknowledged when the
    next one is requested, unless acknowledged before. ``column_builder`` picks how
    consumed messages become columns (:data:`ColumnBuilder`). ``prefetch_kbytes`` bounds
    librdkafka's pre-fetch queue (``queued.max.messages.kbytes``); by default it follows
    the local queue (:meth:`fetch_properties`), so a full worker holds about as many
    records in librdkafka as in its queue, not librdkafka's 64 MiB.

    ``assignment`` picks how partitions reach this worker
    (:class:`~streamtrain.config.AssignmentMode`): ``group`` uses the eager assignor,
    ``cooperative`` the ``cooperative-sticky`` one (a join or leave moves only the
    partitions that change hands), ``shards`` no group at all (the control app leases
    offset ranges: :mod:`streamtrain.ingest.shard_consumer`). ``static_membership`` sets
    ``group.instance.id`` to the worker id (a restarted worker gets its partitions back
    without a rebalance). It is off by default: the embedded broker (Tansu 0.6.0) orphans
    partitions with cooperative-sticky plus static membership, and notices an eager
    static member leave only after ``session_timeout_ms`` (docs/benchmarks.md).
    """

    group: str
    topics: tuple[str, ...]
    partitions: tuple[int, ...] = ()
    worker_id: str = field(default_factory=default_worker_id)
    batch_records: int = 512
    consume_records: int = 10_000
    consume_timeout_s: float = 0.1
    queue_records: int = 100_000
    batch_linger_s: float = 0.05
    commit_interval_s: float = 1.0
    auto_ack: bool = True
    auto_offset_reset: str = "earliest"
    max_record_bytes: int = 1 << 20
    dlq_suffix: str | None = ".dlq"
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    reconnect_backoff_max_ms: int = 2_000
    close_timeout_s: float = 30.0
    consumer_overrides: Mapping[str, Any] = field(default_factory=dict)
    column_builder: ColumnBuilder = "c"
    assignment: AssignmentMode = AssignmentMode.GROUP
    static_membership: bool = False
    prefetch_kbytes: int | None = None

    def __post_init__(self) -> None:
        if not self.group.strip():
            raise ConfigError("the consumer group must not be empty")
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "partitions", tuple(self.partitions))
        object.__setattr__(self, "consumer_overrides", dict(self.consumer_overrides))
        if not self.topics or any(not t.strip() for t in self.topics):
            raise ConfigError("at least one topic is needed, and topic names must not be empty")
        if len(set(self.topics)) != len(self.topics):
            raise ConfigError(f"topics are listed twice: {', '.join(self.topics)}")
        if any(p < 0 for p in self.partitions):
            raise ConfigError(f"partitions must be non-negative, got {list(self.partitions)}")
        if self.prefetch_kbytes is not None and self.prefetch_kbytes < 1:
            raise ConfigError(f"prefetch_kbytes must be at least 1, got {self.prefetch_kbytes}")
        for name in ("batch_records", "consume_records", "queue_records", "max_record_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.queue_records < self.batch_records:
            raise ConfigError(
                f"queue_records ({self.queue_records}) must hold at least one batch "
                f"({self.batch_records})"
            )
        for name in ("consume_timeout_s", "commit_interval_s", "close_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.batch_linger_s < 0:
            raise ConfigError(f"batch_linger_s must not be negative, got {self.batch_linger_s}")
        if self.auto_offset_reset not in _OFFSET_RESETS:
            raise ConfigError(
                f"auto_offset_reset {self.auto_offset_reset!r} is not one of "
                f"{', '.join(sorted(_OFFSET_RESETS))}"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat interval ({self.heartbeat_interval_ms} ms) must be below the "
                f"session timeout ({self.session_timeout_ms} ms)"
            )
        if self.column_builder not in COLUMN_BUILDERS:
            raise ConfigError(
                f"column_builder {self.column_builder!r} is not one of {', '.join(COLUMN_BUILDERS)}"
            )
        object.__setattr__(self, "assignment", AssignmentMode(self.assignment))
        if self.static_membership and self.assignment is AssignmentMode.SHARDS:
            raise ConfigError("static membership needs a consumer group; shards mode has none")
        if self.dlq_suffix is not None and not self.dlq_suffix:
            raise ConfigError("dlq_suffix must not be empty (use None to disable)")

    @property
    def explicit_assignment(self) -> bool:
        return bool(self.partitions)

    def dlq_topic(self, topic: str) -> str | None:
        return None if self.dlq_suffix is None else topic + self.dlq_suffix

    @property
    def cooperative(self) -> bool:
        return self.assignment is AssignmentMode.COOPERATIVE

    @property
    def effective_prefetch_kbytes(self) -> int:
        """``prefetch_kbytes``, or the local queue's records at
        :data:`PREFETCH_BYTES_PER_RECORD` each, within 1 MiB and librdkafka's 64 MiB."""
        if self.prefetch_kbytes is not None:
            return self.prefetch_kbytes
        derived = self.queue_records * PREFETCH_BYTES_PER_RECORD // 1024
        return min(max(derived, 1024), 65_536)

    def fetch_properties(self) -> dict[str, Any]:
        """The librdkafka fetch properties: :data:`FETCH_TUNING` and the pre-fetch bound."""
        return {**FETCH_TUNING, "queued.max.messages.kbytes": self.effective_prefetch_kbytes}

    def consumer_config(self, kafka: KafkaSettings, **callbacks: Any) -> dict[str, Any]:
        """confluent-kafka Consumer properties: manual commits, tuned fetching."""
        membership: dict[str, Any] = {}
        if self.cooperative:
            membership["partition.assignment.strategy"] = "cooperative-sticky"
        if self.static_membership:
            membership["group.instance.id"] = self.worker_id
        return kafka.confluent_config(
            **{
                "group.id": self.group,
                "client.id": f"streamtrain-{self.worker_id}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": self.auto_offset_reset,
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": self.heartbeat_interval_ms,
                "max.poll.interval.ms": self.max_poll_interval_ms,
                "reconnect.backoff.max.ms": self.reconnect_backoff_max_ms,
                **self.fetch_properties(),
                **membership,
                **self.consumer_overrides,
                **callbacks,
            }
        )
