"""Reading the control plane's topics into a :class:`~streamtrain.keda.plans.PlanBook`.

Owned here: :class:`PlanFeed`. It reads, without joining a consumer group and without
committing anything (so any number of scalers can read, and a restarted one reads the
same), every partition of

* the commands topic from its beginning (commands are rare: one per scaling action),
  so a scaler started after the planner, or while the control app is down, still
  knows the newest plan of every job;
* the samples and the heartbeats topics from ``samples_lookback_s`` ago
  (``offsets_for_times``), enough for the workers each job has and for the planner's
  newest heartbeat.

Messages are decoded with :mod:`streamtrain.wire` (never unpickled); an undecodable one
(a null value, a broken frame, a newer schema, an enum value this build does not know)
is counted per topic and kind, the first of each kind logged with its topic, partition
and offset, and skipped: serving goes on. The feed is
*ready* once it has read every partition up to the high watermark it found at start:
until then the scaler answers ``UNAVAILABLE`` rather than a plan it may not have read
yet. A broker that goes away only delays new plans: the last one read stays served
until it is stale (:class:`~streamtrain.keda.plans.PlanSettings`).

librdkafka's calls block, so :meth:`PlanFeed.run` makes them in a thread
(``asyncio.to_thread``) and folds the messages into the book on the event loop; the
loop's ``on_change`` callback gets the jobs whose plan changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, KafkaError, SchemaError
from streamtrain.keda.plans import PlanBook
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.units import MS_PER_S
from streamtrain.wire import DecodeFailures, decode

__all__ = ["FeedSettings", "PlanFeed"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedSettings:
    commands_topic: str = "streamtrain.scale.commands"
    samples_topic: str | None = "streamtrain.throughput"  # None: commands only
    heartbeats_topic: str | None = "streamtrain.scale.heartbeats"  # None: no heartbeats
    samples_lookback_s: float = 300.0
    batch_size: int = 500
    poll_timeout_s: float = 0.5
    request_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.commands_topic:
            raise ConfigError("the scaler needs the commands topic")
        if self.samples_lookback_s <= 0 or self.poll_timeout_s <= 0:
            raise ConfigError("the samples lookback and the poll timeout must be positive")
        if self.batch_size < 1 or self.request_timeout_s <= 0:
            raise ConfigError("the batch size and the request timeout must be positive")


class PlanFeed:
    """See the module docstring. No I/O in ``__init__``; ``start()`` connects."""

    def __init__(
        self,
        kafka: KafkaSettings,
        book: PlanBook,
        settings: FeedSettings,
        *,
        on_change: Callable[[set[str]], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kafka = kafka
        self.book = book
        self.settings = settings
        self.on_change = on_change
        self._clock = clock
        self._consumer: Any = None
        self._behind: dict[tuple[str, int], int] = {}  # partition -> HWM at start
        self.messages = Counter[str]()  # by topic
        self.undecodable = Counter[str]()  # by topic
        self.failures = DecodeFailures("control-plane message", log)  # by kind
        self.errors = 0

    @property
    def ready(self) -> bool:
        """True once every partition was read up to its high watermark at start."""
        return self._consumer is not None and not self._behind

    def catch_up_note(self) -> str:
        left = len(self._behind)
        return f"reading {self.settings.commands_topic} up to date ({left} partition(s) to go)"

    def start(self) -> PlanFeed:
        """Connect and assign every partition (blocking: call it in a thread)."""
        from confluent_kafka import Consumer, KafkaException

        config = self.kafka.confluent_config(
            **{
                "group.id": f"streamtrain-keda-{uuid.uuid4().hex[:12]}",  # never joined
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer = Consumer(config)
            assignment = self._assignment(consumer)
            consumer.assign(assignment)
        except KafkaException as exc:
            raise KafkaError(f"cannot read the plans from Kafka: {exc}") from exc
        self._consumer = consumer
        return self

    def _assignment(self, consumer: Any) -> list[Any]:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

        s = self.settings
        timeout = s.request_timeout_s
        metadata = consumer.list_topics(timeout=timeout)
        recent = [t for t in (s.samples_topic, s.heartbeats_topic) if t]
        assignment: list[Any] = []
        for topic in [s.commands_topic, *recent]:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                raise KafkaError(f"topic {topic!r} does not exist (create it, or start lag run)")
            partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in found.partitions]
            if topic in recent:
                since_ms = int((self._clock() - s.samples_lookback_s) * MS_PER_S)
                asked = [TopicPartition(topic, p.partition, since_ms) for p in partitions]
                partitions = [
                    TopicPartition(topic, p.partition, p.offset if p.offset >= 0 else OFFSET_END)
                    for p in consumer.offsets_for_times(asked, timeout=timeout)
                ]
            for tp in partitions:
                low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
                start = low if tp.offset == OFFSET_BEGINNING else tp.offset
                if tp.offset != OFFSET_END and high > max(start, low):
                    self._behind[(topic, tp.partition)] = high
            assignment += partitions
        return assignment

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    async def run(self, stop: asyncio.Event) -> None:
        """Read until ``stop`` is set (the blocking reads in a thread)."""
        if self._consumer is None:
            raise ConfigError("start() the plan feed first")
        while not stop.is_set():
            batch, positions = await asyncio.to_thread(self._consume)
            self.take(batch)
            self._caught_up(positions)

    def _consume(self) -> tuple[list[Any], dict[tuple[str, int], int]]:
        """One batch, and the positions of the partitions still behind (a thread)."""
        from confluent_kafka import TopicPartition

        s = self.settings
        messages: list[Any] = self._consumer.consume(s.batch_size, timeout=s.poll_timeout_s)
        behind = [TopicPartition(t, p) for t, p in self._behind]
        positions = self._consumer.position(behind) if behind else []
        return messages, {(tp.topic, tp.partition): tp.offset for tp in positions}

    def _caught_up(self, positions: dict[tuple[str, int], int]) -> None:
        """Drop the partitions whose position reached their start HWM (gaps, markers)."""
        for key, position in positions.items():
            high = self._behind.get(key)
            if high is not None and position >= high:
                del self._behind[key]
                if not self._behind:
                    log.info("plans read up to date: %d job(s) known", len(self.book.jobs))

    def take(self, messages: list[Any]) -> set[str]:
        """Fold consumed messages into the book; returns (and reports) the changed jobs."""
        changed: set[str] = set()
        for message in messages:
            if message.error() is not None:
                self.errors += 1
                log.warning("reading plans: %s", message.error())
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            self.messages[topic] += 1
            changed |= self._fold(topic, partition, offset, message.value())
            high = self._behind.get((topic, partition))
            if high is not None and offset >= high - 1:
                del self._behind[(topic, partition)]
                if not self._behind:
                    log.info("plans read up to date: %d job(s) known", len(self.book.jobs))
        if changed and self.on_change is not None:
            self.on_change(changed)
        return changed

    def _fold(self, topic: str, partition: int, offset: int, value: bytes | None) -> set[str]:
        s = self.settings
        try:
            if topic == s.commands_topic:
                command = decode(cp.ScaleCommand, value)
                return {command.job} if self.book.add_command(command) else set()
            if topic == s.heartbeats_topic:
                beat = decode(cp.PlannerHeartbeat, value)
                return {beat.job} if self.book.add_heartbeat(beat) else set()
            sample = decode(cp.ThroughputSample, value)
            return {sample.job} if self.book.add_sample(sample) else set()
        except SchemaError as exc:
            self.undecodable[topic] += 1
            self.failures.add(exc, f"{topic}[{partition}]@{offset}")
            return set()
