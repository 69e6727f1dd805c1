"""Two-phase scaling for executors: who is READY, and admitting new workers together.

Owned here: :class:`Readiness`, which follows a job's ``<job>.worker-states`` topic
(``WorkerStateEvent``: STARTING, READY, DRAINING, LEFT, published by
:mod:`streamtrain.worker.lifecycle`) in a thread and answers READY workers with ADMITTED:

* :meth:`~Readiness.wait_ready` blocks until every named worker said READY (since a
  given time: a restarted worker's old READY does not count) or the timeout passes, and
  returns the ones that did not;
* :meth:`~Readiness.admit` publishes ADMITTED for each named worker at once, so k new
  workers join the group (or ask for shards) within milliseconds of each other: one
  rebalance, not k;
* :meth:`~Readiness.is_ready` is what an executor counts as capacity.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from types import TracebackType

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.errors import SchemaError
from streamtrain.kafka import create_topic
from streamtrain.proto import data_plane_pb2 as dp
from streamtrain.units import now_ms

__all__ = ["Readiness"]

log = logging.getLogger(__name__)


class Readiness:
    """Follows ``topic`` (one partition) from its end at :meth:`start` (module docstring)."""

    def __init__(self, kafka: KafkaSettings, job: str, topic: str) -> None:
        self.kafka, self.job, self.topic = kafka, job, topic
        self._states: dict[str, tuple[int, float]] = {}  # worker -> (state, wall time seen)
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._sequence = 0
        self.undecodable = wire.DecodeFailures("worker state", log)

    def start(self) -> Readiness:
        create_topic(self.kafka, self.topic, 1, exist_ok=True)
        consumer = Consumer(
            self.kafka.confluent_config(
                **{"group.id": f"{self.job}.readiness", "enable.auto.commit": False}
            )
        )
        _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=10)
        consumer.assign([TopicPartition(self.topic, 0, max(high, 0))])
        self._producer = Producer(self.kafka.confluent_config(**{"linger.ms": 0}))
        self._thread = threading.Thread(
            target=self._follow, args=(consumer,), name="streamtrain-readiness", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._producer is not None:
            self._producer.flush(5)

    def __enter__(self) -> Readiness:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _follow(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                for message in consumer.consume(100, 0.1):
                    if message.error() is not None:
                        continue
                    try:
                        event = wire.decode(dp.WorkerStateEvent, message.value())
                    except SchemaError as exc:  # counted by kind, each kind logged once
                        self.undecodable.add(exc, self.topic)
                        continue
                    if event.state == dp.WorkerStateEvent.ADMITTED or not event.worker_id:
                        continue
                    with self._changed:
                        self._states[event.worker_id] = (event.state, time.time())
                        self._changed.notify_all()
        except KafkaException:
            log.exception("following %s failed", self.topic)
        finally:
            consumer.close()

    def is_ready(self, worker_id: str, since_s: float = 0.0) -> bool:
        with self._changed:
            state = self._states.get(worker_id)
        return state is not None and state[0] == dp.WorkerStateEvent.READY and state[1] >= since_s

    def wait_ready(self, worker_ids: Iterable[str], since_s: float, timeout_s: float) -> set[str]:
        """Wait until each of ``worker_ids`` said READY after ``since_s`` (wall time);
        returns those that did not within ``timeout_s``."""
        waiting = set(worker_ids)
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                waiting = {
                    w
                    for w in waiting
                    if not (
                        (s := self._states.get(w)) is not None
                        and s[0] == dp.WorkerStateEvent.READY
                        and s[1] >= since_s
                    )
                }
                left = deadline - time.monotonic()
                if not waiting or left <= 0:
                    return waiting
                self._changed.wait(min(left, 0.1))

    def admit(self, worker_ids: Iterable[str]) -> None:
        """ADMITTED for each worker, flushed together."""
        producer = self._producer
        if producer is None:
            return
        for worker_id in worker_ids:
            self._sequence += 1
            event = dp.WorkerStateEvent(
                job=self.job,
                worker_id=worker_id,
                state=dp.WorkerStateEvent.ADMITTED,
                sequence=self._sequence,
                emitted_at_ms=now_ms(),
            )
            producer.produce(self.topic, key=worker_id.encode(), value=wire.encode(event))
        producer.flush(5)
