"""A worker's two-phase start and leave, announced on Kafka (``<job>.worker-states``).

Owned here: :class:`Lifecycle`. With a states topic it publishes this worker's
``WorkerStateEvent`` (key: worker id) at each step of its life: STARTING when the
process is up, READY once the app's warm start ran and it is about to take data,
DRAINING when told to leave, LEFT when it closed. An executor that admits new workers
together (:mod:`streamtrain.executors.readiness`) answers READY with ADMITTED;
with ``admission_timeout_s`` the worker waits for that answer (or the timeout) before
it joins the group or asks for shards, so k new workers join in one rebalance. Without
a topic every call is a no-op.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.errors import SchemaError
from streamtrain.ingest.settings import IngestSettings
from streamtrain.kafka import create_topic
from streamtrain.proto import data_plane_pb2 as dp
from streamtrain.units import now_ms

__all__ = ["Lifecycle", "default_states_topic"]

log = logging.getLogger(__name__)

State = dp.WorkerStateEvent.State
_FLUSH_S = 2.0


def default_states_topic(job: str) -> str:
    return f"{job}.worker-states"


class Lifecycle:
    """This worker's state events (module docstring)."""

    def __init__(self, kafka: KafkaSettings, settings: IngestSettings, topic: str | None) -> None:
        self.kafka, self.settings, self.topic = kafka, settings, topic
        self._producer: Producer | None = None
        self._sequence = 0
        self.ready_at_s: float | None = None

    def __enter__(self) -> Lifecycle:
        if self.topic:
            create_topic(self.kafka, self.topic, 1, exist_ok=True)
            self._producer = Producer(
                self.kafka.confluent_config(
                    **{"client.id": f"streamtrain-{self.settings.worker_id}-states"}
                )
            )
            self._publish(dp.WorkerStateEvent.STARTING)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._producer is not None:
            self._publish(dp.WorkerStateEvent.LEFT)
            self._producer = None

    def ready(self, admission_timeout_s: float | None = None) -> None:
        """Say READY; with ``admission_timeout_s``, wait that long at most for ADMITTED."""
        self.ready_at_s = time.monotonic()
        if self._producer is None or self.topic is None:
            return
        waiter = self._admission_reader() if admission_timeout_s else None
        self._publish(dp.WorkerStateEvent.READY)
        if waiter is not None and admission_timeout_s:
            try:
                self._wait_admitted(waiter, admission_timeout_s)
            finally:
                waiter.close()

    def draining(self) -> None:
        if self._producer is not None:
            self._publish(dp.WorkerStateEvent.DRAINING)

    def _publish(self, state: State) -> None:
        assert self._producer is not None and self.topic is not None  # noqa: S101
        self._sequence += 1
        event = dp.WorkerStateEvent(
            job=self.settings.group,
            worker_id=self.settings.worker_id,
            state=state,
            sequence=self._sequence,
            emitted_at_ms=now_ms(),
        )
        try:
            self._producer.produce(
                self.topic, key=self.settings.worker_id.encode(), value=wire.encode(event)
            )
            # best effort, bounded: a leaving worker must not outwait its executor's grace
            if self._producer.flush(_FLUSH_S):
                log.warning("state %s not delivered within %.0f s", State.Name(state), _FLUSH_S)
        except (KafkaException, BufferError) as exc:
            log.warning("could not announce state %s: %s", State.Name(state), exc)

    def _admission_reader(self) -> Consumer | None:
        assert self.topic is not None  # noqa: S101
        reader = Consumer(
            self.kafka.confluent_config(
                **{
                    "group.id": f"{self.settings.group}.admission-{self.settings.worker_id}",
                    "enable.auto.commit": False,
                }
            )
        )
        try:
            _, high = reader.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=10)
            reader.assign([TopicPartition(self.topic, 0, max(high, 0))])
        except KafkaException as exc:
            log.warning("cannot wait for admission on %s (%s): joining now", self.topic, exc)
            reader.close()
            return None
        return reader

    def _wait_admitted(self, reader: Consumer, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        me = self.settings.worker_id
        while time.monotonic() < deadline:
            for message in reader.consume(100, 0.1):
                if message.error() is not None:
                    continue
                try:
                    event = wire.decode(dp.WorkerStateEvent, message.value() or b"")
                except SchemaError:
                    continue
                if event.state == dp.WorkerStateEvent.ADMITTED and event.worker_id in (me, "*"):
                    log.info("admitted after %.2f s", time.monotonic() - (self.ready_at_s or 0))
                    return
        log.warning("not admitted within %.0f s: taking data anyway", timeout_s)
