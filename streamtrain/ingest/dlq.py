"""The dead-letter topic: records a worker cannot decode, with where they came from and why.

Owned here: :class:`DeadLetterQueue`. Each bad record is produced to
``<topic><suffix>`` (``clicks.dlq``) with its original payload and headers naming its
origin and the error::

    streamtrain.origin.topic, streamtrain.origin.partition, streamtrain.origin.offset,
    streamtrain.origin.timestamp_ms, streamtrain.error, streamtrain.worker

The record's key is ``<partition>:<offset>``. The topic is created (one partition, so
dead letters keep their order) the first time it is needed. A bad record counts as handled, and is
acknowledged to the offset tracker, only once the broker confirmed the dead letter:
until then its partition's commit cannot pass it, so a crash re-reads it. A payload the
producer refuses as too large is sent again truncated to ``truncate_bytes``, with a
``streamtrain.truncated`` header, so an oversized record cannot block its partition.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError as ClientError
from confluent_kafka import KafkaException, Message, Producer

from streamtrain.config import KafkaSettings
from streamtrain.errors import KafkaError
from streamtrain.kafka import create_topic
from streamtrain.records import RecordColumns

__all__ = ["DeadLetterQueue", "dlq_headers"]

log = logging.getLogger(__name__)

Acknowledge = Callable[[RecordColumns], object]


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

    ``poll`` serves delivery reports (call it often, from any thread); ``close`` waits
    for the outstanding ones.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        suffix: str,
        worker_id: str,
        acknowledge: Acknowledge,
        *,
        truncate_bytes: int = 64 * 1024,
        partitions: int = 1,
    ) -> None:
        self._kafka = kafka
        self.suffix = suffix
        self.worker_id = worker_id
        self._acknowledge = acknowledge
        self.truncate_bytes = truncate_bytes
        self.partitions = partitions
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._topics: set[str] = set()
        self.sent = 0
        self.delivered = 0
        self.failed = 0

    def _get_producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer(
                    self._kafka.confluent_config(
                        **{"linger.ms": 5, "client.id": f"streamtrain-dlq-{self.worker_id}"}
                    )
                )
            return self._producer

    def send(self, records: RecordColumns, errors: Sequence[str]) -> None:
        """Dead-letter every record of ``records``; ``errors[i]`` says why record ``i`` failed."""
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
        self, producer: Producer, one: RecordColumns, error: str, value: bytes, *, truncated: bool
    ) -> None:
        def delivered(err: ClientError | None, _: Message) -> None:
            if err is None:
                self.delivered += 1
                self._acknowledge(one)
            elif err.code() == ClientError.MSG_SIZE_TOO_LARGE and not truncated:
                self._produce(producer, one, error, value[: self.truncate_bytes], truncated=True)
            else:
                self.failed += 1
                log.error(
                    "dead letter for %s[%d]@%d was not delivered (%s); the record stays "
                    "unacknowledged and is re-read after a restart",
                    one.topic,
                    int(one.partitions[0]),
                    int(one.offsets[0]),
                    err.str(),
                )

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

    def poll(self, timeout_s: float = 0.0) -> None:
        producer = self._producer
        if producer is not None:
            producer.poll(timeout_s)

    @property
    def outstanding(self) -> int:
        producer = self._producer
        return 0 if producer is None else len(producer)

    def close(self, timeout_s: float = 10.0) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        left = producer.flush(timeout_s)
        if left:
            log.error(
                "%d dead letter(s) not confirmed within %.0f s; their records stay "
                "unacknowledged and are re-read after a restart",
                left,
                timeout_s,
            )
