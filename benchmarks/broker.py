"""Embedded broker facts, measured: start-up time, produce rates and watermark exactness.

Run: .venv/bin/python -m benchmarks.broker [--records N]

Produces N records of 200 bytes into one partition twice, with a batching producer
(librdkafka defaults) and with ``batch.num.messages=1``, and reports each rate and
whether the high watermark the broker reports equals the records produced. The last
line is machine-readable:
``startup_ms=<x> batched_records_per_s=<n> single_records_per_s=<n> ratio=<single/batched>
batched_hwm_exact=<bool> single_hwm_exact=<bool>``.
"""

from __future__ import annotations

import argparse
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker
from streamtrain.config import KafkaSettings
from streamtrain.kafka import create_topic


def _produce(settings: KafkaSettings, records: int, **conf: object) -> tuple[float, bool]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(settings, topic, 1)
    producer = Producer(settings.confluent_config(**conf))
    payload = b"x" * 200
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("producer did not deliver every record within 120 s")
    elapsed = time.perf_counter() - started
    consumer = Consumer(settings.confluent_config(**{"group.id": "bench-watermarks"}))
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return records / elapsed, high == records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        startup_ms = (time.perf_counter() - started) * 1000
        settings = broker.kafka_settings()
        batched_rate, batched_exact = _produce(settings, args.records)
        single_rate, single_exact = _produce(settings, args.records, **{"batch.num.messages": 1})
    print(f"embedded broker start-up (spawn to first Metadata answer): {startup_ms:.0f} ms")
    print(f"batching producer:        {batched_rate:,.0f} records/s, HWM exact: {batched_exact}")
    print(f"batch.num.messages=1:     {single_rate:,.0f} records/s, HWM exact: {single_exact}")
    print(
        f"startup_ms={startup_ms:.0f} batched_records_per_s={batched_rate:.0f} "
        f"single_records_per_s={single_rate:.0f} ratio={single_rate / batched_rate:.3f} "
        f"batched_hwm_exact={batched_exact} single_hwm_exact={single_exact}"
    )


if __name__ == "__main__":
    main()
