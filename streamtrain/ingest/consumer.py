"""One worker's Kafka consumer: fetch thread, rebalances, at-least-once commits, batches.

Owned here: :class:`IngestConsumer`. It is responsible for:

* joining consumer group ``settings.group`` on ``settings.topics`` (or reading explicit
  partitions), with auto commit and auto offset store off;
* a background fetch thread that calls ``consume()`` in batches, cuts them at the batch
  size (:mod:`streamtrain.ingest.batching`), turns messages into columns
  (:mod:`streamtrain.ingest.messages`), tells the :class:`OffsetTracker` which ranges
  are in flight, and fills the bounded :class:`LocalQueue`; when the queue is
  full it pauses the assigned partitions (and keeps calling ``consume()``, so rebalance
  callbacks and the poll interval are served) and resumes at half;
* commits of the tracker's contiguous acknowledged prefix: every
  ``commit_interval_s`` (asynchronously), on revoke (synchronously, before the
  partitions go) and on close;
* rebalances: on revoke, commit what is acknowledged, drop queued and in-flight records
  of the revoked partitions (their new owner re-reads them: duplicates possible, loss
  never), tell ``on_revoked``; on assign, start tracking from the committed offset.
  With ``assignment=cooperative`` the callbacks see only the partitions that change
  hands and use ``incremental_assign``/``incremental_unassign`` (plain ``assign()``
  raises under the cooperative protocol); the other partitions keep training;
* an unreachable broker: librdkafka reconnects with exponential backoff (up to
  ``reconnect_backoff_max_ms``); the consumer logs one clear line when Kafka goes away
  and one when it is back, and failed commits are simply retried at the next interval;
* handing out decoded :class:`Batch` objects (through :class:`BatchReader`), as an
  iterator, a torch ``IterableDataset`` or a ``tf.data.Dataset``
  (:class:`~streamtrain.ingest.source.TrainingSource`, shared with the shard reader).

No I/O happens in ``__init__``; :meth:`start` (or ``with``) connects.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka import KafkaError as ClientError

from streamtrain.config import KafkaSettings
from streamtrain.errors import KafkaError, StreamtrainError
from streamtrain.heap import keep_large_buffers_in_heap
from streamtrain.ingest.batching import MessageBatcher
from streamtrain.ingest.committer import Committer
from streamtrain.ingest.decoders import Decoder, RawDecoder
from streamtrain.ingest.dlq import DeadLetterQueue
from streamtrain.ingest.health import KafkaHealth
from streamtrain.ingest.localqueue import LocalQueue, RecordQueue
from streamtrain.ingest.messages import to_columns
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.ownership import Ownership, by_topic, describe
from streamtrain.ingest.reader import BatchReader
from streamtrain.ingest.settings import IngestSettings
from streamtrain.ingest.source import TrainingSource
from streamtrain.ingest.tracker import OffsetTracker
from streamtrain.kafka import kafka_error
from streamtrain.partition_key import PartitionKey
from streamtrain.records import RecordColumns

if TYPE_CHECKING:
    pass

__all__ = ["IngestConsumer"]

log = logging.getLogger(__name__)

Partitions = list[PartitionKey]


class IngestConsumer(TrainingSource):
    """Reads this worker's share of the topics into acknowledged training batches.

    Usage::

        with IngestConsumer(kafka, IngestSettings(group="job", topics=("clicks",)),
                            StructDecoder(CTR_RECORD)) as ingest:
            for batch in ingest.batches():
                train_step(batch.columns)
                batch.ack()          # or leave it to auto-ack on the next batch

    ``queue`` replaces the default :class:`LocalQueue` and ``acknowledge`` the default
    acknowledgement of trained records to ``tracker`` (the shuffle layer's seam: see
    :mod:`streamtrain.worker.shuffle_queue`, which passes all three);
    ``on_assigned`` / ``on_revoked`` are called from the fetch thread with the
    ``(topic, partition)`` pairs, after the tracker and queue were updated.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        settings: IngestSettings,
        decoder: Decoder | None = None,
        *,
        metrics: WorkerMetrics | None = None,
        queue: RecordQueue | None = None,
        tracker: OffsetTracker | None = None,
        acknowledge: Callable[[RecordColumns], object] | None = None,
        on_assigned: Callable[[Partitions], None] | None = None,
        on_revoked: Callable[[Partitions], None] | None = None,
    ) -> None:
        super().__init__()
        self.kafka = kafka
        self.settings = settings
        self.decoder: Decoder = decoder if decoder is not None else RawDecoder()
        self.tracker = tracker if tracker is not None else OffsetTracker()
        self.queue: RecordQueue = queue or LocalQueue(settings.queue_records)
        self.metrics = metrics or WorkerMetrics()
        self.metrics.bind(self.tracker.progress, self._gauges)
        trained = acknowledge if acknowledge is not None else self.acknowledge
        self.dead_letters = (
            DeadLetterQueue(
                kafka,
                settings.dlq_suffix,
                settings.worker_id,
                trained,
                topics=settings.topics,
                metrics=self.metrics,
            )
            if settings.dlq_suffix is not None
            else None
        )
        self.reader = BatchReader(
            self.queue,
            self.decoder,
            trained,
            dead_letters=self.dead_letters,
            max_record_bytes=settings.max_record_bytes,
            metrics=self.metrics,
            auto_ack=settings.auto_ack,
            batch_records=settings.batch_records,
            linger_s=settings.batch_linger_s,
            source_lingers=queue is None,  # the fetch thread cuts (and lingers for) batches
        )
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._consumer: Consumer | None = None
        self._ownership = Ownership()
        self._paused = False
        self._health = KafkaHealth(
            kafka.bootstrap, settings.group, settings.reconnect_backoff_max_ms
        )
        self._committer = Committer(
            self.tracker, self.metrics, settings.group, self._health.back_online
        )
        self._single_topic = settings.topics[0] if len(settings.topics) == 1 else None
        # consumed messages not yet a full batch (fetch thread)
        self._batcher: MessageBatcher[Any] = MessageBatcher(
            settings.batch_records, settings.batch_linger_s
        )
        self.assigned_event = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        if self._consumer is not None:
            raise StreamtrainError("ingest consumer already started")
        keep_large_buffers_in_heap()  # a payload buffer per chunk: no page faults for each
        consumer = Consumer(
            self.settings.consumer_config(
                self.kafka, error_cb=self._on_error, on_commit=self._committer.on_commit
            )
        )
        self._consumer = consumer
        reading = f"{', '.join(self.settings.topics)} as group {self.settings.group!r}"
        try:
            if self.settings.explicit_assignment:
                partitions = [
                    TopicPartition(topic, p)
                    for topic in self.settings.topics
                    for p in self.settings.partitions
                ]
                self._track(consumer, partitions)
                consumer.assign(partitions)
            else:
                consumer.subscribe(
                    list(self.settings.topics),
                    on_assign=self._assign_callback,
                    on_revoke=self._revoke_callback,
                    on_lost=self._lost_callback,
                )
        except KafkaException as exc:
            consumer.close()
            self._consumer = None
            raise kafka_error(exc, f"cannot start consuming {reading}") from exc
        self._start_fetching("fetch", "ingest", reading)
        return self

    def close(self) -> None:
        """Commit what is acknowledged, leave the group, stop the fetch thread.

        Batches handed out but not acknowledged are not committed: their records are
        read again by whoever owns the partition next.
        """
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        timeout_s = self.settings.close_timeout_s
        if self.dead_letters is not None:
            self.dead_letters.close(timeout_s)  # delivered dead letters acknowledge records
        if not self._stop_fetching(timeout_s):
            log.error("fetch thread did not stop within %.0f s", timeout_s)
        try:
            self._committer.commit(consumer, asynchronous=False)
            consumer.close()  # runs the revoke callback: commits, then leaves the group
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer of group %r: %s", self.settings.group, exc)
        finally:
            self.queue.close()

    # -- the trainer's side ----------------------------------------------------------------

    def acknowledge(self, records: RecordColumns) -> int:
        """Acknowledge every record of ``records`` to the offset tracker; return the count."""
        acked = 0
        for partition, first, last in records.offset_ranges():
            acked += self.tracker.ack(records.topic, partition, first, last)
        return acked

    # -- state for callers and metrics ------------------------------------------------------

    @property
    def last_committed(self) -> dict[PartitionKey, int]:
        """The last position committed per partition, kept after the partition is revoked."""
        return self._committer.last_committed

    def assignment(self) -> set[PartitionKey]:
        return self.tracker.assigned()

    def _gauges(self) -> dict[str, int]:
        return {
            "queue_records": self.queue.records,
            "stale_acks": self.tracker.stale_acks,
            "in_flight_records": self.tracker.in_flight_records(),
        }

    # -- the fetch thread --------------------------------------------------------------------

    def _fetch(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        interval_s = self.settings.commit_interval_s
        next_commit = time.monotonic() + interval_s
        while not self._stop.is_set():
            self._flow_control(consumer)
            wait_s = self._batcher.wait_s(time.monotonic(), self.settings.consume_timeout_s)
            messages = consumer.consume(self.settings.consume_records, wait_s)
            self._batch_up(messages)
            if time.monotonic() >= next_commit:
                self._committer.commit(consumer, asynchronous=True)
                next_commit = time.monotonic() + interval_s
            if self.dead_letters is not None:
                self.dead_letters.poll(0)

    def _batch_up(self, messages: list[Any]) -> None:
        """Hand out training-batch-sized chunks; carry a remainder until more arrive."""
        for run in self._batcher.add(messages, time.monotonic()):
            self._ingest(run)

    def _ingest(self, messages: Sequence[Any]) -> None:
        """Queue ``messages`` (whole batches, or a remainder) as batch-sized chunks."""
        chunks, errors = to_columns(
            messages,
            self._single_topic,
            builder=self.settings.column_builder,
            batch_records=self.settings.batch_records,
        )
        for error in errors:
            self._on_message_error(error)
        if chunks:
            self._health.back_online()
        consumed = 0
        for chunk in chunks:
            ranges = chunk.offset_ranges()
            if not self._ownership.covers(chunk.topic, ranges):
                chunk = self._ownership.only_owned(chunk)  # a fetch that raced a revoke: rare
                ranges = chunk.offset_ranges()
            if not len(chunk):
                continue
            for partition, first, last in ranges:
                self.tracker.handed_out(chunk.topic, partition, first, last)
            self.queue.put(chunk)
            consumed += len(chunk)
        if consumed:
            self.metrics.add(consumed=consumed)

    def _flow_control(self, consumer: Consumer) -> None:
        if not self._paused and self.queue.full:
            consumer.pause(consumer.assignment())
            self._paused = True
            log.debug("local queue full (%d records): fetching paused", self.queue.records)
        elif self._paused and self.queue.records <= self.queue.capacity_records // 2:
            consumer.resume(consumer.assignment())
            self._paused = False
            log.debug("local queue at %d records: fetching resumed", self.queue.records)

    # -- rebalances -------------------------------------------------------------------------

    def _track(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        committed: dict[PartitionKey, int] = {}
        try:
            for tp in consumer.committed(partitions, timeout=10):
                if tp.error is None:
                    committed[(tp.topic, tp.partition)] = tp.offset
        except KafkaException as exc:
            log.warning("could not read committed offsets (%s); positions unknown", exc)
        for tp in partitions:
            self.tracker.assign(tp.topic, tp.partition, committed.get((tp.topic, tp.partition), -1))
        self._ownership.update(self.tracker.assigned())
        self.assigned_event.set()

    def _assign_callback(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._track(consumer, partitions)
        if self.settings.cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if self._paused and partitions:
            consumer.pause(partitions)
        keys = [(tp.topic, tp.partition) for tp in partitions]
        log.info("assigned %s", describe(keys))
        if self._on_assigned is not None:
            self._on_assigned(keys)

    def _revoke_callback(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self._committer.commit(consumer, asynchronous=False, only=set(keys))
        self._unpause(consumer, partitions)
        self._forget(keys, "revoked")
        if self.settings.cooperative and partitions:
            consumer.incremental_unassign(partitions)

    def _lost_callback(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._unpause(consumer, partitions)
        self._forget([(tp.topic, tp.partition) for tp in partitions], "lost")
        if self.settings.cooperative and partitions:
            consumer.incremental_unassign(partitions)

    @staticmethod
    def _unpause(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """librdkafka keeps a partition's pause across a revoke and a later re-assign
        (confluentinc/librdkafka#1849): clear it while the partition is still ours, or a
        partition handed back after a rebalance would never be fetched again."""
        try:
            consumer.resume(partitions)
        except KafkaException as exc:
            log.debug("resuming revoked partitions: %s", exc)

    def _forget(self, keys: Partitions, how: str) -> None:
        dropped = sum(self.queue.drop(topic, parts) for topic, parts in by_topic(keys).items())
        gone = set(keys)
        dropped += self._batcher.drop(lambda m: (m.topic(), m.partition()) in gone)
        in_flight = {key: p.in_flight_records for key, p in self.tracker.progress().items()}
        for topic, partition in keys:
            self.tracker.revoke(topic, partition)
        self._ownership.update(self.tracker.assigned())
        log.info(
            "%s %s: dropped %d queued record(s), %d unacknowledged in flight (re-read by "
            "the next owner)",
            how,
            describe(keys),
            dropped,
            sum(in_flight.get(key, 0) for key in keys),
        )
        if self._on_revoked is not None:
            self._on_revoked(keys)

    # -- errors and outages -----------------------------------------------------------------

    def _on_error(self, error: ClientError) -> None:
        fatal = self._health.on_error(error)
        if fatal is not None:
            self._fail(fatal, stop=True)

    def _on_message_error(self, error: ClientError) -> None:
        if error.fatal():
            raise KafkaError(f"fatal consume error: {error.str()}")
        if error.code() != ClientError._PARTITION_EOF:
            self._on_error(error)
