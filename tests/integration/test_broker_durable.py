"""The durable embedded broker: records and committed offsets survive a broker kill -9.

The fault tests and the chaos benchmark take the broker away for real with
this: the Tansu process is SIGKILLed (clients see refused connections, not a pause) and
started again on the same port, its data on a local S3 server that outlived it.
"""

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker
from streamtrain.config import EmbeddedBrokerSettings
from streamtrain.kafka import create_topic

RECORDS = 4_000


def _read_all(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    ids: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(ids) < RECORDS and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    ids.append(int(message.value() or b"-1"))
    finally:
        consumer.close()
    return ids


def test_a_killed_durable_broker_restarts_with_every_record_and_committed_offset():
    settings = EmbeddedBrokerSettings(durable=True)
    with EmbeddedBroker(settings) as broker:
        kafka = broker.kafka_settings()
        create_topic(kafka, "durable", partitions=4)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce("durable", str(i).encode(), partition=i % 4)
        assert producer.flush(30) == 0
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "job"})
        committer.commit(
            offsets=[TopicPartition("durable", 0, 123), TopicPartition("durable", 3, 7)],
            asynchronous=False,
        )
        committer.close()
        pid, port = broker.pid, broker.bootstrap
        stored = broker.storage_stats()  # every produced batch is an object on S3
        assert stored is not None and stored.creates > 4 and stored.objects >= 4

        broker.kill()
        assert not broker.running
        broker.restart()

        assert broker.bootstrap == port and broker.pid != pid
        after = broker.storage_stats()  # the same S3 server: what it held is still there
        assert after is not None and after.objects >= stored.objects
        assert sorted(_read_all(broker.bootstrap, "durable", 4)) == list(range(RECORDS))
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "job"})
        committed = reader.committed([TopicPartition("durable", p) for p in range(4)], timeout=10)
        reader.close()
        assert [(tp.partition, tp.offset) for tp in committed if tp.offset >= 0] == [
            (0, 123),
            (3, 7),
        ]


def test_an_in_memory_broker_restarts_empty():
    with EmbeddedBroker() as broker:
        assert broker.storage_stats() is None
        create_topic(broker.kafka_settings(), "volatile", partitions=1)
        broker.kill()
        broker.restart()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
        try:
            topics = consumer.list_topics(timeout=10).topics
        finally:
            consumer.close()
        assert "volatile" not in topics
