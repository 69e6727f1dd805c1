"""The shard coordinator's Kafka I/O, blocking (the control app runs it in a thread).

Owned here: :class:`ShardOffsets`. It is responsible for:

* **discovery**: the job's partitions and where each one starts (the job's committed
  offset, else the low watermark). It is retried at every read until it succeeds, and
  repeated every ``discover_interval_s`` so partitions added to a topic later are
  trained too; a partition's start is settled only when both of its calls answered, so
  a committed offset that could not be read never becomes "start at the log start";
* **ends**: one batched ListOffsets per read, then a probe consumer reads the last
  batch of the partitions whose watermark stood still (the embedded broker reports a
  batch's base offset + 1 as the watermark; the decisions are
  :class:`~streamtrain.shards.ends.PartitionEnds`). Probing every moved partition
  instead cost a fetch round trip per read, up to 0.8 s when the broker is busiest;
* **commits** of each partition's done prefix under the job's group id (so
  ``streamtrain lag status``, Burrow and ``kafka-consumer-groups.sh`` see the true lag).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from streamtrain.config import KafkaSettings
from streamtrain.control.shard_coordinator import ShardJobSettings
from streamtrain.errors import KafkaError
from streamtrain.partition_key import PartitionKey
from streamtrain.shards.ends import PartitionEnds

__all__ = ["ShardOffsets"]

log = logging.getLogger(__name__)


class ShardOffsets:
    """The coordinator's Kafka calls (module docstring); one thread at a time."""

    _clock: Any = staticmethod(time.monotonic)
    _next_discovery_s = float("-inf")  # discovery is due at the first read
    WARN_AFTER_MISSES = 3  # unanswered probes in a row of one partition before a warning

    def __init__(
        self,
        kafka: KafkaSettings,
        settings: ShardJobSettings,
        timeout_s: float,
        *,
        clock: Any = time.monotonic,
    ) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._clock = clock
        self._consumer = Consumer(
            kafka.confluent_config(
                **{
                    "group.id": settings.job,
                    "enable.auto.commit": False,
                    "client.id": f"streamtrain-shards-{settings.job}",
                }
            )
        )
        self._probe = Consumer(
            kafka.confluent_config(
                **{
                    "group.id": f"{settings.job}.shard-probe",
                    "enable.auto.commit": False,
                    "client.id": f"streamtrain-shards-probe-{settings.job}",
                    "fetch.wait.max.ms": 10,
                }
            )
        )
        self._admin = AdminClient(kafka.confluent_config())
        self._partitions: list[TopicPartition] = []
        self._starts: dict[PartitionKey, int] = {}
        self.ends = PartitionEnds()

    def read(self) -> tuple[dict[PartitionKey, int], dict[PartitionKey, int]]:
        """``(partition ends, start offsets)`` of the job's partitions whose start is
        known (discovery when due, one batched ListOffsets, then the probe of the
        partitions whose watermark stood still). Raises :class:`KafkaError` when the
        broker does not answer; the next read tries again."""
        try:
            if self._clock() >= self._next_discovery_s:
                self._discover()
            highs = self._list(OffsetSpec.latest())  # type: ignore[no-untyped-call]
            self._probe_ends(highs)
        except KafkaException as exc:
            raise KafkaError(f"reading the offsets of job {self.settings.job!r}: {exc}") from exc
        return self.ends.ends(highs), self._starts

    def _discover(self) -> None:
        """The job's partitions; the start of each new one. Nothing changes unless every
        call answered (a failure raises, and the next read tries again)."""
        found = [tp for topic in self.settings.topics for tp in self._topic_partitions(topic)]
        new = [tp for tp in found if (tp.topic, tp.partition) not in self._starts]
        if new:
            lows = self._list(OffsetSpec.earliest(), new)  # type: ignore[no-untyped-call]
            starts = dict(lows)
            for tp in self._committed(new):
                if tp.error is not None:
                    raise KafkaError(
                        f"the committed offset of {tp.topic}[{tp.partition}]: {tp.error}"
                    )
                if tp.offset >= 0:
                    starts[(tp.topic, tp.partition)] = tp.offset
            if len(starts) < len(new):
                raise KafkaError(f"no start offset for {len(new) - len(starts)} new partition(s)")
            if self._starts:
                log.info("shards of job %s: %d new partition(s) found", self.settings.job, len(new))
            self._starts.update(starts)
        self._partitions = [tp for tp in found if (tp.topic, tp.partition) in self._starts]
        self._next_discovery_s = self._clock() + self.settings.discover_interval_s

    def _topic_partitions(self, topic: str) -> list[TopicPartition]:
        meta = self._consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            log.warning("shards of job %s: topic %s not found (yet)", self.settings.job, topic)
            return []
        return [TopicPartition(topic, p) for p in sorted(meta.partitions)]

    def _committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return list(self._consumer.committed(partitions, timeout=self.timeout_s))

    def _list(
        self, spec: Any, partitions: list[TopicPartition] | None = None
    ) -> dict[PartitionKey, int]:
        partitions = self._partitions if partitions is None else partitions
        if not partitions:
            return {}
        futures = self._admin.list_offsets(
            {TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
            request_timeout=self.timeout_s,
        )
        return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}

    def _probe_ends(self, highs: dict[PartitionKey, int], wait_s: float = 0.5) -> None:
        """Read the last batch of each partition whose watermark stood still since the
        last read and was not probed at yet (module docstring). Waiting longer than
        ``wait_s`` does not make an unanswered probe answer (docs/benchmarks.md, "The
        demo")."""
        still = self.ends.to_probe(highs, self._clock())
        if not still:
            return
        self._probe.assign([TopicPartition(t, p, highs[(t, p)] - 1) for t, p in still])
        pending = set(still)
        errors: dict[PartitionKey, str] = {}  # the last error the probe got, per partition
        deadline = time.monotonic() + wait_s
        # Until every probed partition's last batch has arrived (a fetched batch is queued
        # whole), then once more without waiting for what is already queued. Waiting for
        # the probe to go quiet instead never ends while producers write.
        drained = False
        while not drained:
            drained = not pending or time.monotonic() >= deadline
            messages = self._probe.consume(10_000, 0.0 if drained else 0.02)
            for message in messages:
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                if message.error() is not None:
                    if topic is not None and partition is not None:
                        errors[(topic, partition)] = str(message.error())
                    continue
                if topic is None or partition is None or offset is None:
                    continue
                key = (topic, partition)
                self.ends.got(key, offset)
                if key in highs and offset >= highs[key] - 1:  # not a record left from before
                    pending.discard(key)
        now_s = self._clock()
        for key in still:
            if key not in pending:
                missed = self.ends.probed(key, highs[key], now_s)
                if missed >= self.WARN_AFTER_MISSES:
                    log.warning(
                        "shards of job %s: the probe of %s[%d] answered after %d that did not",
                        self.settings.job,
                        key[0],
                        key[1],
                        missed,
                    )
        if pending:  # their last batches stay uncut until a later probe gets them
            log.info(
                "shards of job %s: the probe of %d partition(s) got no record in %.1f s; "
                "probed again at the next read",
                self.settings.job,
                len(pending),
                wait_s,
            )
        for key in sorted(pending):
            if self.ends.missed(key) == self.WARN_AFTER_MISSES:
                log.warning(
                    "shards of job %s: %s[%d] has a watermark of %d, but %d probes in a row "
                    "from offset %d got no record (%s); records past the watermark stay "
                    "untrained until one does",
                    self.settings.job,
                    key[0],
                    key[1],
                    highs[key],
                    self.WARN_AFTER_MISSES,
                    highs[key] - 1,
                    errors.get(key, "no error"),
                )
        self._probe.unassign()

    def commit(self, positions: dict[PartitionKey, int]) -> None:
        """Commit ``positions`` under the job's group id."""
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
        try:
            for tp in self._consumer.commit(offsets=offsets, asynchronous=False) or []:
                if tp.error is not None:
                    raise KafkaError(f"commit of {tp.topic}[{tp.partition}]: {tp.error}")
        except KafkaException as exc:
            raise KafkaError(f"committing job {self.settings.job!r}: {exc}") from exc

    def close(self) -> None:
        self._consumer.close()
        self._probe.close()
