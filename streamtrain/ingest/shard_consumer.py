"""One worker's reader of leased offset-range shards (``--assignment shards``).

Owned here: :class:`ShardConsumer`, the Kafka side of a worker whose control app hands
out shards (:mod:`streamtrain.shards`); the protocol itself (grants, lease ids,
acknowledgements, updates) is the pure :class:`~streamtrain.shards.client.ShardClient`.
It joins no consumer group, so a worker joining or leaving moves nothing. It is
responsible for:

* sending the client's ``ShardUpdate``s on ``<job>.shards`` and reading its grants on
  ``<job>.shard-grants`` (from the high watermark it saw before its first request, so
  no grant to it is missed);
* reading each shard with ``incremental_assign`` at the shard's start (a jump to a
  shard that does not continue the previous one re-assigns the partition), tagging each
  record with the lease it was read under, dropping what a fetch returns past the
  shards held, and un-assigning partitions it holds no shard of;
* acknowledging trained records to the lease they were read under (records of a shard
  taken away meanwhile count for nothing; a batch whose training step did not commit is
  handed out again by the reader, ``Batch.nack()``, and counts once it is trained);
* heartbeats every ``heartbeat_interval_s`` (a worker killed outright stops them, and
  the control app requeues its shards);
* leaving (:meth:`~ShardConsumer.leave`): no more requests, shards not started are
  handed back at once, the ones being read are finished (:attr:`drained`); on
  :meth:`close` whatever is still held is handed back in a last ``leaving`` update.

It commits nothing: the control app commits each partition's done prefix under the
job's group. No I/O happens in ``__init__``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import KafkaError as ClientError
from numpy.typing import NDArray

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.errors import KafkaError, SchemaError, StreamtrainError
from streamtrain.heap import keep_large_buffers_in_heap
from streamtrain.ingest.decoders import Decoder, RawDecoder
from streamtrain.ingest.dlq import DeadLetterQueue
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.messages import to_columns
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.reader import BatchReader
from streamtrain.ingest.settings import IngestSettings
from streamtrain.ingest.source import TrainingSource
from streamtrain.kafka import create_topic, kafka_error
from streamtrain.partition_key import PartitionKey
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.records import RecordColumns
from streamtrain.shards.client import ShardClient
from streamtrain.shards.holdings import NO_LEASE, Holdings
from streamtrain.shards.messages import default_topics
from streamtrain.shards.model import Grant
from streamtrain.units import now_ms

__all__ = ["SHARD_FETCH_TUNING", "ShardConsumer"]

log = logging.getLogger(__name__)

#: A shard worker assigns new partitions (and reads its grants) all the time; a fetch
#: that finds no data would otherwise hold the next one back for librdkafka's default
#: 500 ms. Measured on the embedded broker (one worker, 16 partitions of 10 records/s,
#: 0.5-s cuts): records waited 7.0 s at the median with 500 ms, 3.3 s with 250 ms and
#: 2.4 s with 100, 50 or 10 ms; 100 ms keeps the idle fetches a worker sends the broker
#: ten times fewer than 10 ms does.
SHARD_FETCH_TUNING = {"fetch.wait.max.ms": 100}


class ShardConsumer(TrainingSource):
    """Trains the shards the control app leases to this worker (module docstring)."""

    def __init__(
        self,
        kafka: KafkaSettings,
        settings: IngestSettings,
        decoder: Decoder | None = None,
        *,
        metrics: WorkerMetrics | None = None,
        prefetch_shards: int = 4,
        heartbeat_interval_s: float = 0.5,
        topics: tuple[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.kafka, self.settings = kafka, settings
        self.decoder: Decoder = decoder if decoder is not None else RawDecoder()
        self.metrics = metrics or WorkerMetrics()
        self.metrics.bind(dict, self._gauges)
        self.queue = LocalQueue(settings.queue_records)
        self.updates_topic, self.grants_topic = topics or default_topics(settings.group)
        self.client = ShardClient(
            settings.group,
            settings.worker_id,
            prefetch_shards=prefetch_shards,
            batch_records=settings.batch_records,
            heartbeat_interval_s=heartbeat_interval_s,
        )
        self.dead_letters = (
            DeadLetterQueue(kafka, settings.dlq_suffix, settings.worker_id, self.acknowledge)
            if settings.dlq_suffix is not None
            else None
        )
        self.reader = BatchReader(
            self.queue,
            self.decoder,
            self.acknowledge,
            dead_letters=self.dead_letters,
            max_record_bytes=settings.max_record_bytes,
            metrics=self.metrics,
            auto_ack=settings.auto_ack,
            batch_records=settings.batch_records,
            linger_s=settings.batch_linger_s,
            still_wanted=self._still_held,
        )
        self._lock = threading.Lock()  # the client: fetch thread and trainer
        self._consumer: Consumer | None = None
        self._grants: Consumer | None = None
        self._producer: Producer | None = None
        self._positions: dict[PartitionKey, int] = {}  # assigned partitions: next offset
        self.assigned_event = threading.Event()  # set on the first grant

    @property
    def holdings(self) -> Holdings:
        """The shards held (:class:`~streamtrain.shards.holdings.Holdings`)."""
        return self.client.holdings

    @property
    def shards_done(self) -> int:
        return self.client.shards_done

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> Self:
        if self._consumer is not None:
            raise StreamtrainError("shard consumer already started")
        keep_large_buffers_in_heap()  # a payload buffer per chunk: no page faults for each
        for topic in (self.updates_topic, self.grants_topic):
            create_topic(self.kafka, topic, 1, exist_ok=True)
        config = {  # the settings' consumer_overrides win over the shard tuning
            **SHARD_FETCH_TUNING,
            **self.settings.consumer_config(self.kafka, error_cb=self._on_error),
        }
        self._consumer = Consumer(config)
        grants_config = {
            **config,
            "group.id": f"{self.settings.group}.grants-{self.settings.worker_id}",
            "auto.offset.reset": "latest",
        }
        grants_config.pop("error_cb")
        self._grants = Consumer(grants_config)
        self._producer = Producer(
            self.kafka.confluent_config(
                **{"client.id": f"streamtrain-{self.settings.worker_id}", "linger.ms": 0}
            )
        )
        try:
            self._listen_for_grants(self._grants)
        except KafkaException as exc:
            self._close_clients()
            raise kafka_error(exc, f"cannot read shard grants on {self.grants_topic}") from exc
        self._start_fetching(
            "shards",
            "shard",
            f"shards of {', '.join(self.settings.topics)} (job {self.settings.group!r})",
        )
        return self

    def _listen_for_grants(self, grants: Consumer) -> None:
        metadata = grants.list_topics(self.grants_topic, timeout=10)
        topic = metadata.topics.get(self.grants_topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise KafkaError(f"the shard grants topic {self.grants_topic!r} does not exist")
        partitions = []
        for p in topic.partitions:
            _, high = grants.get_watermark_offsets(TopicPartition(self.grants_topic, p), timeout=10)
            partitions.append(
                TopicPartition(self.grants_topic, p, high if high >= 0 else OFFSET_END)
            )
        grants.assign(partitions)

    def leave(self) -> None:
        """Stop asking for shards; hand back those not started; finish the others."""
        with self._lock:
            if self.client.leaving:
                return
            count = self.client.leave()
        log.info("leaving: handing back %d shard(s) not started", count)

    @property
    def drained(self) -> bool:
        """Leaving, and every shard it held is done or handed back."""
        with self._lock:
            return self.client.drained

    def close(self) -> None:
        """Hand back whatever is still held (a last ``leaving`` update), stop the thread."""
        if self._consumer is None:
            return
        with self._lock:
            self.client.leaving = True
        self._stop_fetching(self.settings.close_timeout_s)
        if self.dead_letters is not None:
            self.dead_letters.close(self.settings.close_timeout_s)
        try:
            with self._lock:
                update = self.client.last_update(time.monotonic())
            self._send(update)
            if self._producer is not None:
                self._producer.flush(self.settings.close_timeout_s)
        except (KafkaException, BufferError) as exc:
            log.warning("could not send the last shard update: %s", exc)
        self._close_clients()
        self.queue.close()

    def _close_clients(self) -> None:
        for client in (self._consumer, self._grants):
            if client is not None:
                try:
                    client.close()
                except (KafkaException, RuntimeError) as exc:
                    log.debug("closing a shard consumer client: %s", exc)
        self._consumer = self._grants = None

    # -- the trainer's side -------------------------------------------------------------

    def acknowledge(self, records: RecordColumns) -> int:
        """Trained: each record counts for the lease it was read under."""
        if records.lease_ids is None:
            log.warning(
                "ignoring an acknowledgement of %d records read under no lease", len(records)
            )
            return 0
        with self._lock:
            return self.client.ack(records.lease_ids)

    def _still_held(self, records: RecordColumns) -> NDArray[np.bool_]:
        """Records of a shard taken away while they waited in the queue are not
        trained: the shard's next holder reads them again."""
        if records.lease_ids is None:
            return np.ones(len(records), dtype=np.bool_)
        with self._lock:
            held = self.client.holds(records.lease_ids)
        if not held.all():
            log.info("dropping %d queued records of shards taken away", len(held) - held.sum())
        return held

    @property
    def last_committed(self) -> dict[PartitionKey, int]:
        return {}  # the control app commits

    def _gauges(self) -> dict[str, int]:
        return {"queue_records": self.queue.records, "shards_held": len(self.client.holdings)}

    # -- the fetch thread -----------------------------------------------------------------

    def _fetch(self) -> None:
        consumer, grants = self._consumer, self._grants
        if consumer is None or grants is None:
            return
        while not self._stop.is_set():
            self._read_grants(grants)
            self._sync_assignment(consumer)
            if self._positions and not self.queue.full:
                messages = consumer.consume(
                    self.settings.consume_records, self.settings.consume_timeout_s
                )
                self._ingest(messages)
                self._check_positions(consumer)
            else:
                self._stop.wait(0.01)
            self._report(time.monotonic())
            if self.dead_letters is not None:
                self.dead_letters.poll(0)

    def _read_grants(self, grants: Consumer) -> None:
        for message in grants.consume(100, 0.0 if self._positions else 0.02):
            if message.error() is not None:
                continue
            key = message.key()
            if key is not None and key != self.settings.worker_id.encode():
                continue
            try:
                grant = wire.decode(pb.ShardGrant, message.value() or b"")
            except SchemaError as exc:
                log.warning("ignoring an unreadable shard grant: %s", exc)
                continue
            if grant.worker_id != self.settings.worker_id:
                continue
            with self._lock:
                added = self.client.apply(grant)
            if added:
                self.assigned_event.set()

    def _sync_assignment(self, consumer: Consumer) -> None:
        with self._lock:
            wanted = self.client.holdings.read_positions()
        gone = [key for key in self._positions if key not in wanted]
        moved = [k for k, at in wanted.items() if k in self._positions and self._positions[k] != at]
        if gone or moved:
            consumer.incremental_unassign([TopicPartition(t, p) for t, p in gone + moved])
            for key in gone + moved:
                del self._positions[key]
        new = [(k, at) for k, at in wanted.items() if k not in self._positions]
        if new:
            consumer.incremental_assign([TopicPartition(t, p, at) for (t, p), at in new])
            self._positions.update(new)

    def _ingest(self, messages: Sequence[Any]) -> None:
        chunks, errors = to_columns(messages, None, builder=self.settings.column_builder)
        for error in errors:
            if error.code() != ClientError._PARTITION_EOF:
                self._on_error(error)
        for chunk in chunks:
            leases = np.full(len(chunk), NO_LEASE, dtype=np.int64)
            with self._lock:
                for partition in np.unique(chunk.partitions).tolist():
                    index = np.flatnonzero(chunk.partitions == partition)
                    offsets = chunk.offsets[index]
                    leases[index] = self.client.accept(chunk.topic, partition, offsets)
                    key = (chunk.topic, partition)
                    if key in self._positions:
                        self._positions[key] = max(self._positions[key], int(offsets.max()) + 1)
            chunk = chunk.leased(leases)
            keep = leases != NO_LEASE
            if not keep.all():
                chunk = chunk.take(np.flatnonzero(keep))
            if len(chunk):
                self.queue.put(chunk)
                self.metrics.add(consumed=len(chunk))

    def _check_positions(self, consumer: Consumer) -> None:
        """Shards that end in a gap are read once the consumer's position passed them."""
        try:
            positions = consumer.position([TopicPartition(t, p) for t, p in self._positions])
        except KafkaException:
            return
        with self._lock:
            for tp in positions:
                if tp.offset >= 0:
                    self.client.holdings.position(tp.topic, tp.partition, tp.offset)

    # -- talking to the control app ---------------------------------------------------------

    def _report(self, now_s: float) -> None:
        with self._lock:
            update = self.client.update(now_s)
        if update is not None:
            self._send(update)

    def _send(self, update: pb.ShardUpdate) -> None:
        producer = self._producer
        if producer is None:
            return
        update.sent_at_ms = now_ms()
        producer.produce(
            self.updates_topic, key=self.settings.worker_id.encode(), value=wire.encode(update)
        )
        producer.poll(0)

    def _on_error(self, error: ClientError) -> None:
        if error.fatal():
            self._fail(KafkaError(f"fatal Kafka error: {error.str()}"), stop=True)
        else:
            log.debug("kafka: %s", error.str())

    def held(self) -> list[Grant]:
        with self._lock:
            return self.client.holdings.grants()
