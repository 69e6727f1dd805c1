"""Ingest throughput: streamtrain's consumer path against a raw confluent-kafka loop.

Run: .venv/bin/python -m benchmarks.ingest [--records 1000000] [--rounds 3]

Produces ``--records`` records of 200 bytes into an 8-partition topic on the embedded
broker, then, alternating for ``--rounds`` rounds on that same topic:

* raw: a confluent-kafka ``Consumer.consume(10000)`` loop that only touches each message
  (``error()`` and ``value()``), with the same fetch properties streamtrain uses
  (``streamtrain.ingest.settings.FETCH_TUNING``), so the ratio measures the Python-side
  work only;
* streamtrain: ``IngestConsumer`` with ``RawDecoder(200)``, ``next_batch`` of
  ``--batch-records`` (default 5000, half a ``consume()`` batch; on the development
  machine power-of-two sizes such as 4096 measured 10-15 % slower, for reasons not
  found), every batch acknowledged, commits every second and at close; at the end the
  committed offsets must equal the records read. It uses the column builder the
  installation has (``streamtrain.ingest.messages.active_builder()``: ``c`` when the C
  extension was built); each round also runs it once more on the pure-Python accessor
  path (``IngestSettings(column_builder="python")``), reported for reference (not in
  the ratio when the C builder is there).

Both read all partitions by explicit assignment (no group join in the timing) and are
timed from their first record to their last. Reported: the median records/s of each,
the ratio, a raw loop with librdkafka's default fetch properties for reference, and the
memory of a worker whose 100k-record local queue is full (RSS growth, and the queue's own
bytes). The last line is machine-readable:
``ratio=<streamtrain/raw> streamtrain_records_per_s=<n> raw_records_per_s=<n>``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker
from streamtrain.config import KafkaSettings
from streamtrain.ingest import IngestConsumer, IngestSettings, RawDecoder, messages
from streamtrain.ingest.settings import FETCH_TUNING, ColumnBuilder
from streamtrain.kafka import create_topic

PARTITIONS = 8
RECORD_BYTES = 200
TIMEOUT_S = 300.0


def _produce(settings: KafkaSettings, topic: str, records: int) -> float:
    producer = Producer(
        settings.confluent_config(
            **{
                "linger.ms": 20,
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 500_000,
            }
        )
    )
    payload = b"r" * RECORD_BYTES
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("the producer did not deliver every record within 120 s")
    return records / (time.perf_counter() - started)


def _raw(settings: KafkaSettings, topic: str, records: int, tuned: bool) -> float:
    conf: dict[str, Any] = {
        "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        **(FETCH_TUNING if tuned else {}),
    }
    consumer = Consumer(settings.confluent_config(**conf))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    first_batch = 0
    started = 0.0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while seen < records and time.monotonic() < deadline:
            messages = consumer.consume(10_000, 1.0)
            if messages and not started:
                started = time.perf_counter()
                first_batch = len(messages)
            for message in messages:
                if message.error() is None:
                    message.value()
            seen += len(messages)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if seen < records:
        raise RuntimeError(f"raw loop read {seen} of {records} records in {TIMEOUT_S:.0f} s")
    return (seen - first_batch) / elapsed


def _streamtrain(
    settings: KafkaSettings,
    topic: str,
    records: int,
    batch_records: int,
    builder: ColumnBuilder = "c",
) -> float:
    ingest = IngestSettings(
        group=f"bench-st-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        partitions=tuple(range(PARTITIONS)),
        batch_records=batch_records,
        dlq_suffix=None,
        column_builder=builder,
    )
    consumer = IngestConsumer(settings, ingest, RawDecoder(RECORD_BYTES))
    seen = 0
    first_batch = 0
    started = 0.0
    deadline = time.monotonic() + TIMEOUT_S
    with consumer:
        while seen < records and time.monotonic() < deadline:
            batch = consumer.next_batch(timeout_s=1.0)
            if batch is None:
                continue
            if not started:
                started = time.perf_counter()
                first_batch = len(batch)
            if batch["payload"].shape != (len(batch), RECORD_BYTES):
                raise RuntimeError("decoded batch has the wrong shape")
            batch.ack()
            seen += len(batch)
        elapsed = time.perf_counter() - started
    committed = sum(consumer.last_committed.values())
    if seen < records or committed != records:
        raise RuntimeError(f"streamtrain read {seen} and committed {committed} of {records}")
    return (seen - first_batch) / elapsed


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _queue_memory(settings: KafkaSettings, topic: str, queue_records: int) -> tuple[int, int]:
    """RSS growth and queued payload+column bytes once a worker's local queue is full."""
    ingest = IngestSettings(
        group=f"bench-mem-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        partitions=tuple(range(PARTITIONS)),
        queue_records=queue_records,
        dlq_suffix=None,
    )
    before = _rss_bytes()
    consumer = IngestConsumer(settings, ingest, RawDecoder(RECORD_BYTES))
    with consumer:
        deadline = time.monotonic() + 60
        while not consumer.queue.full and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let librdkafka's pre-fetch settle after the pause
        grown = _rss_bytes() - before
        queued = consumer.queue.records * (RECORD_BYTES + 4 + 8 + 8 + 8)
    return grown, queued


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-records", type=int, default=5000)
    parser.add_argument("--queue-records", type=int, default=100_000)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        settings = broker.kafka_settings()
        topic = f"bench-ingest-{uuid.uuid4().hex[:8]}"
        create_topic(settings, topic, PARTITIONS)
        produce_rate = _produce(settings, topic, args.records)
        print(f"produced {args.records:,} records of {RECORD_BYTES} B: {produce_rate:,.0f}/s")
        builder = messages.active_builder()
        print(f"column builder: {builder}")
        raw_rates, st_rates, accessor_rates = [], [], []
        for round_no in range(1, args.rounds + 1):
            raw_rates.append(_raw(settings, topic, args.records, tuned=True))
            st_rates.append(_streamtrain(settings, topic, args.records, args.batch_records))
            line = (
                f"round {round_no}: raw {raw_rates[-1]:,.0f} records/s, "
                f"streamtrain {st_rates[-1]:,.0f} records/s"
            )
            if builder == "c":
                accessor_rates.append(
                    _streamtrain(settings, topic, args.records, args.batch_records, "python")
                )
                line += f" (accessor path {accessor_rates[-1]:,.0f})"
            print(line)
        default_rate = _raw(settings, topic, args.records, tuned=False)
        grown, queued = _queue_memory(settings, topic, args.queue_records)
    raw = statistics.median(raw_rates)
    st = statistics.median(st_rates)
    print(f"raw consume() loop, librdkafka default fetch properties: {default_rate:,.0f} records/s")
    print(f"raw consume() loop (median of {args.rounds}):               {raw:,.0f} records/s")
    print(f"streamtrain to acked numpy batches (median of {args.rounds}): {st:,.0f} records/s")
    if accessor_rates:
        accessor = statistics.median(accessor_rates)
        print(
            f"streamtrain on the accessor path (no C builder): {accessor:,.0f} records/s, "
            f"ratio {accessor / raw:.3f}"
        )
    print(
        f"worker with a full {args.queue_records:,}-record local queue: "
        f"RSS +{grown / 2**20:.0f} MiB (of which queued records and columns "
        f"{queued / 2**20:.0f} MiB; the rest is librdkafka pre-fetch and allocator)"
    )
    print(f"ratio={st / raw:.3f} streamtrain_records_per_s={st:.0f} raw_records_per_s={raw:.0f}")


if __name__ == "__main__":
    main()
