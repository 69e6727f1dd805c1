"""confluent-kafka and aiokafka against the broker `streamtrain broker` prints: an
8-partition topic, produce, and consume in a consumer group."""

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.config import KafkaSettings
from streamtrain.kafka import create_topic, describe_topics

from .cli_process import start_broker_cli

PARTITIONS = 8
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def cli_broker():
    """Settings for the broker that `streamtrain broker` started and printed."""
    with start_broker_cli() as cli:
        yield KafkaSettings(bootstrap=cli.bootstrap)
        cli.stop()


def _unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_confluent_kafka_topic_produce_and_group_consume(cli_broker):
    settings = cli_broker
    topic = _unique("confluent")
    create_topic(settings, topic, PARTITIONS)
    assert {t.name: t.partitions for t in describe_topics(settings)}[topic] == PARTITIONS

    per_partition = 25
    producer = Producer(settings.confluent_config(**{"batch.num.messages": 1}))
    sent = set()
    for i in range(PARTITIONS * per_partition):
        value = f"record-{i}".encode()
        producer.produce(topic, value=value, partition=i % PARTITIONS)
        sent.add(value)
    assert producer.flush(30) == 0

    group = _unique("group")
    consumer = Consumer(
        settings.confluent_config(
            **{
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **FAST_GROUP,
            }
        )
    )
    consumer.subscribe([topic])
    received: set[bytes | None] = set()
    partitions_seen: set[int | None] = set()
    deadline = time.monotonic() + 60
    try:
        while received != sent and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=1.0):
                assert message.error() is None, message.error()
                received.add(message.value())
                partitions_seen.add(message.partition())
        assert received == sent
        assert partitions_seen == set(range(PARTITIONS))
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10
        )
        assert [tp.offset for tp in committed] == [per_partition] * PARTITIONS
        low_high = [consumer.get_watermark_offsets(tp, timeout=10) for tp in committed]
        assert low_high == [(0, per_partition)] * PARTITIONS  # exact: one record per batch
    finally:
        consumer.close()


def test_aiokafka_produce_and_group_consume(cli_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    settings = cli_broker
    topic = _unique("aiokafka")
    create_topic(settings, topic, PARTITIONS)
    count = 80

    async def run():
        producer = AIOKafkaProducer(**settings.aiokafka_config())
        await producer.start()
        try:
            for i in range(count):
                await producer.send_and_wait(topic, f"a-{i}".encode(), partition=i % PARTITIONS)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            group_id=_unique("aio-group"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            **settings.aiokafka_config(),
        )
        await consumer.start()
        received: set[bytes] = set()
        try:
            async with asyncio.timeout(60):
                while len(received) < count:
                    batches = await consumer.getmany(timeout_ms=1000)
                    for records in batches.values():
                        received.update(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return received

    received = asyncio.run(run())
    assert received == {f"a-{i}".encode() for i in range(count)}
