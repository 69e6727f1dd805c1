"""A dead letter the broker could not take is retried until it can.

The durable embedded broker is killed (SIGKILL: connections refused, not paused) while a
dead letter is on its way, and restarted on the same port with its data; the dead
letter is delivered after all, and only then is its record acknowledged."""

import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from streamtrain.broker import EmbeddedBroker
from streamtrain.config import EmbeddedBrokerSettings
from streamtrain.ingest.dlq import DeadLetterQueue
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.kafka import create_topic
from streamtrain.testing import records


def _poll_until(dlq, predicate, what, timeout_s=90.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        dlq.poll(0.1)


def _dead_letters(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(topic, 0, 0)])
    keys: list[bytes | None] = []
    deadline = time.monotonic() + 30
    try:
        while len(keys) < 2 and time.monotonic() < deadline:
            keys += [m.key() for m in consumer.consume(10, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return keys


def test_a_dead_letter_that_failed_during_an_outage_is_retried_and_then_acknowledged():
    """A failed dead-letter delivery was never retried, so its record
    held back its partition's commit for the life of the process."""
    with EmbeddedBroker(EmbeddedBrokerSettings(durable=True)) as broker:
        kafka = broker.kafka_settings()
        create_topic(kafka, "clicks", 1)
        acknowledged: list[int] = []
        metrics = WorkerMetrics()
        dlq = DeadLetterQueue(
            kafka,
            ".dlq",
            "w1",
            lambda one: acknowledged.extend(one.offsets.tolist()),
            topics=("clicks",),
            metrics=metrics,
            delivery_timeout_s=2.0,
            retry_backoff_s=0.2,
            max_retry_backoff_s=1.0,
        )
        try:
            dlq.send(records(0, 1, topic="clicks"), ["undecodable"])
            _poll_until(dlq, lambda: acknowledged == [0], "the first dead letter")

            broker.kill()
            dlq.send(records(1, 1, topic="clicks"), ["undecodable"])
            _poll_until(dlq, lambda: dlq.failed >= 1, "the delivery to fail")
            assert acknowledged == [0]  # not handled: its partition cannot commit past it
            assert metrics.snapshot().dead_letter_failures >= 1
            assert dlq.outstanding >= 1

            broker.restart()
            _poll_until(dlq, lambda: acknowledged == [0, 1], "the retried dead letter")
            assert dlq.outstanding == 0
            assert dlq.delivered == 2
        finally:
            dlq.close()
        assert sorted(_dead_letters(broker.bootstrap, "clicks.dlq")) == [b"0:0", b"0:1"]
