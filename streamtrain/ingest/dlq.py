"""The dead-letter topic: records a worker cannot decode, with where they came from and why.

Owned here: :class:`DeadLetterQueue`. Each bad record is produced to
``<topic><suffix>`` (``clicks.dlq``) with its original payload and headers naming its
origin and the error::

    streamtrain.origin.topic, streamtrain.origin.partition, streamtrain.origin.offset,
    streamtrain.origin.timestamp_ms, streamtrain.error, streamtrain.worker

The record's key is ``<partition>:<offset>``. The topic is created (one partition, so
dead letters keep their order; the cluster's replication factor) the first time it is
needed. A bad record counts as handled, and is acknowledged to the offset tracker, only
once the broker confirmed the dead letter: until then its partition's commit cannot pass
it, so a crash re-reads it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError as ClientError
from confluent_kafka import KafkaException, Message, Producer

from streamtrain.config import KafkaSettings
from streamtrain.errors import KafkaError
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.kafka import create_topic
from streamtrain.records import RecordColumns
from streamtrain.units import s_to_ms

__all__ = ["DeadLetterQueue", "dlq_headers"]

log = logging.getLogger(__name__)

Acknowledge = Callable[[RecordColumns], object]


@dataclass(frozen=True, slots=True)
class _Retry:
    """A dead letter to produce again at ``due_s`` (monotonic)."""

    due_s: float
    attempt: int
    record: RecordColumns
    error: str
    value: bytes
    truncated: bool


def dlq_headers(
    record: RecordColumns, error: str, worker_id: str, *, truncated: bool = False
) -> list[tuple[str, str | bytes | None]]:
    """The headers of the dead letter for the single record in ``record``."""
    headers: list[tuple[str, str | bytes | None]] = [
        ("streamtrain.origin.topic", record.topic.encode()),
        ("streamtrain.origin.partition", str(int(record.partitions[0])).encode()),
        ("streamtrain.origin.offset", str(int(record.offsets[0])).encode()),
        ("streamtrain.origin.timestamp_ms", str(int(record.timestamps_ms[0])).encode()),
        ("streamtrain.error", error.encode("utf-8", errors="replace")[:4000]),
        ("streamtrain.worker", worker_id.encode()),
    ]
    if truncated:
        headers.append(("streamtrain.truncated", b"true"))
    return headers


class DeadLetterQueue:
    """Produces dead letters and acknowledges each origin record once it is delivered.

    ``poll`` serves delivery reports and due retries (call it often, from any thread);
    ``close`` waits for the outstanding ones. ``topics=None`` dead-letters any topic.

    A payload the producer refuses as too large is sent again truncated to
    ``truncate_bytes``, with a ``streamtrain.truncated`` header, so an oversized record
    cannot block its partition. A dead letter the broker did not confirm (a broker gone
    for longer than ``delivery_timeout_s``, say) is produced again after a backoff
    (doubling from ``retry_backoff_s`` up to ``max_retry_backoff_s``), for as long as
    the worker runs; each failure is logged as an error and counted (``failed``, and
    the worker's ``dead_letter_failures`` metric, for alerting). Nothing else waits for
    it: the rest of the records flow, and only the record itself holds back its
    partition's commit. Only the topics the worker reads (``topics``) have dead-letter
    topics written: a record of any other topic (which only a peer's forwarded batch
    could bring) is refused, logged and left unacknowledged, so no peer can make a
    worker create or fill arbitrary topics.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        suffix: str,
        worker_id: str,
        acknowledge: Acknowledge,
        *,
        topics: Collection[str] | None = None,
        metrics: WorkerMetrics | None = None,
        truncate_bytes: int = 64 * 1024,
        partitions: int = 1,
        delivery_timeout_s: float = 30.0,
        retry_backoff_s: float = 0.5,
        max_retry_backoff_s: float = 30.0,
    ) -> None:
        self._kafka = kafka
        self.suffix = suffix
        self.worker_id = worker_id
        self._acknowledge = acknowledge
        self.topics = None if topics is None else frozenset(topics)
        self._metrics = metrics
        self.truncate_bytes = truncate_bytes
        self.partitions = partitions
        self.delivery_timeout_s = delivery_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.max_retry_backoff_s = max_retry_backoff_s
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._topics: set[str] = set()
        self._retries: list[_Retry] = []
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self.refused = 0

    def _get_producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer(
                    self._kafka.confluent_config(
                        **{
                            "linger.ms": 5,
                            "client.id": f"streamtrain-dlq-{self.worker_id}",
                            "message.timeout.ms": max(int(s_to_ms(self.delivery_timeout_s)), 1),
                        }
                    )
                )
            return self._producer

    @property
    def retrying(self) -> int:
        """Dead letters waiting for their next attempt."""
        with self._lock:
            return len(self._retries)

    def send(self, records: RecordColumns, errors: Sequence[str]) -> None:
        """Dead-letter every record of ``records``; ``errors[i]`` says why record ``i`` failed."""
        if self.topics is not None and records.topic not in self.topics:
            with self._lock:
                self.refused += len(records)
            log.error(
                "refusing to dead-letter %d record(s) of topic %r, which worker %s does not "
                "read (a peer's batch?): they stay unacknowledged",
                len(records),
                records.topic,
                self.worker_id,
            )
            return
        producer = self._get_producer()
        self._ensure_topic(records.topic + self.suffix)
        for i, error in enumerate(errors):
            one = records.take(slice(i, i + 1))
            log.warning(
                "dead-lettering %s[%d]@%d to %s: %s",
                one.topic,
                int(one.partitions[0]),
                int(one.offsets[0]),
                one.topic + self.suffix,
                error,
            )
            self._produce(producer, one, error, one.payloads, truncated=False)

    def _ensure_topic(self, topic: str) -> None:
        """Create the dead-letter topic (one partition) the first time it is used."""
        if topic in self._topics:
            return
        try:
            create_topic(self._kafka, topic, self.partitions, exist_ok=True)
        except KafkaError as exc:  # no permission, say: the broker may still auto-create it
            log.warning("could not create dead-letter topic %s: %s", topic, exc.message)
        self._topics.add(topic)

    def _produce(
        self,
        producer: Producer,
        one: RecordColumns,
        error: str,
        value: bytes,
        *,
        truncated: bool,
        attempt: int = 1,
    ) -> None:
        def delivered(err: ClientError | None, _: Message) -> None:
            if err is None:
                self.delivered += 1
                self._acknowledge(one)
            elif err.code() == ClientError.MSG_SIZE_TOO_LARGE and not truncated:
                self._produce(producer, one, error, value[: self.truncate_bytes], truncated=True)
            else:
                self._failed(one, error, value, truncated, attempt, err.str())

        headers = dlq_headers(one, error, self.worker_id, truncated=truncated)
        key = f"{int(one.partitions[0])}:{int(one.offsets[0])}".encode()
        while True:
            try:
                producer.produce(
                    one.topic + self.suffix,
                    value=value,
                    key=key,
                    headers=headers,
                    on_delivery=delivered,
                )
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args else None
                if code == ClientError.MSG_SIZE_TOO_LARGE and not truncated:
                    value, truncated = value[: self.truncate_bytes], True
                    headers = dlq_headers(one, error, self.worker_id, truncated=True)
                    continue
                raise KafkaError(
                    f"cannot dead-letter {one.topic}[{int(one.partitions[0])}]@"
                    f"{int(one.offsets[0])}: {exc}",
                    retriable=True,
                ) from exc
            break
        self.sent += 1

    def _failed(
        self, one: RecordColumns, error: str, value: bytes, truncated: bool, attempt: int, why: str
    ) -> None:
        backoff_s = min(self.retry_backoff_s * 2 ** (attempt - 1), self.max_retry_backoff_s)
        with self._lock:
            self.failed += 1
            self._retries.append(
                _Retry(time.monotonic() + backoff_s, attempt + 1, one, error, value, truncated)
            )
        if self._metrics is not None:
            self._metrics.add(dead_letter_failures=1)
        log.error(
            "dead letter for %s[%d]@%d was not delivered (%s, attempt %d); retrying in "
            "%.1f s; until then the record holds back its partition's commit",
            one.topic,
            int(one.partitions[0]),
            int(one.offsets[0]),
            why,
            attempt,
            backoff_s,
        )

    def poll(self, timeout_s: float = 0.0) -> None:
        """Serve delivery reports, and produce the dead letters whose retry is due."""
        producer = self._producer
        if producer is None:
            return
        producer.poll(timeout_s)
        now = time.monotonic()
        with self._lock:
            due = [r for r in self._retries if r.due_s <= now]
            self._retries = [r for r in self._retries if r.due_s > now]
        for retry in due:
            try:
                self._produce(
                    producer,
                    retry.record,
                    retry.error,
                    retry.value,
                    truncated=retry.truncated,
                    attempt=retry.attempt,
                )
            except KafkaError as exc:
                self._failed(
                    retry.record, retry.error, retry.value, retry.truncated, retry.attempt, str(exc)
                )

    @property
    def outstanding(self) -> int:
        """Dead letters not yet confirmed: in the producer, or waiting for a retry."""
        producer = self._producer
        return (0 if producer is None else len(producer)) + self.retrying

    def close(self, timeout_s: float = 10.0) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        left = producer.flush(timeout_s) + self.retrying
        if left:
            log.error(
                "%d dead letter(s) not confirmed within %.0f s; their records stay "
                "unacknowledged and are re-read after a restart",
                left,
                timeout_s,
            )
