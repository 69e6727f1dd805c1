"""Ingest throughput: streamtrain's consumer path against a raw confluent-kafka loop.

Run: .venv/bin/python -m benchmarks.ingest [--records 1000000] [--rounds 3]
     [--batch-records 512,1024,4096,5000] [--accessor]

Produces ``--records`` records of 200 bytes into an 8-partition topic on the embedded
broker, then, alternating for ``--rounds`` rounds on that same topic:

* raw: a confluent-kafka ``Consumer.consume(10000)`` loop that only touches each message
  (``error()`` and ``value()``), with the same fetch properties streamtrain uses
  (``streamtrain.ingest.settings.FETCH_TUNING``), so the ratio measures the Python-side
  work only;
* streamtrain: ``IngestConsumer`` with ``RawDecoder(200)`` and its default settings
  (the local queue, its pre-fetch bound), ``next_batch`` of each of ``--batch-records``
  in turn (default: 512, 1,024, 4,096 and 5,000, all in one run), every batch
  acknowledged, commits every second and at close; at the end the committed offsets
  must equal the records read. It uses the column builder the installation has
  (``streamtrain.ingest.messages.active_builder()``: ``c`` when the C extension was
  built); with ``--accessor`` each round also runs the largest batch size on the
  pure-Python accessor path (``IngestSettings(column_builder="python")``), reported for
  reference.

Both read all partitions by explicit assignment (no group join in the timing) and are
timed from their first record to their last, over whole batches only: the raw loop reads
``--records`` rounded down to a multiple of its 10,000-record ``consume()``, streamtrain
rounded down to a multiple of the batch size. A partial last batch waits by design (the
raw loop's ``consume()`` for its 1 s timeout, streamtrain's remainder for
``batch_linger_s``, 50 ms): latency at the end of a finite topic, not throughput, and on
a quiet machine, where 1M records take half a second, a 50 ms wait alone would read as
a ratio of 0.9 (it was 0.15 s before the consumer honoured the linger: the ratios of
0.72-0.76 at 512, 1,024 and 4,096 that did not divide 1M, against 0.97 at 5,000 that
did). The last batch's wait is printed for each batch size. Reported: the median records/s of each,
the ratio per batch size, a raw loop with librdkafka's default fetch properties for
reference, and the memory of a worker whose default 100k-record local queue is full: its
RSS growth against the queued records' own bytes (payloads and columns), and the bound
``2 x queued + RSS_CONSTANT_MIB`` the worker's summary reports too
(:mod:`streamtrain.ingest.memory`). The last line is machine-readable:
``ratio=<the lowest over the batch sizes> ratio_<size>=<x>... best_batch_records=<size>
streamtrain_records_per_s=<at the best size> raw_records_per_s=<n>
rss_growth_mib=<x> queued_mib=<x> rss_bound_mib=<x>``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker
from streamtrain.config import KafkaSettings, comma_list
from streamtrain.ingest import IngestConsumer, IngestSettings, RawDecoder, messages
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.memory import RSS_CONSTANT_MIB, rss_bound_bytes, rss_bytes
from streamtrain.ingest.settings import ColumnBuilder
from streamtrain.kafka import create_topic

PARTITIONS = 8
RECORD_BYTES = 200
TIMEOUT_S = 300.0
RAW_CONSUME_RECORDS = 10_000


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
    # the fetch properties of a default IngestSettings: FETCH_TUNING and the pre-fetch bound
    fetch = IngestSettings(group="g", topics=(topic,)).fetch_properties()
    conf: dict[str, Any] = {
        "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        **(fetch if tuned else {}),
    }
    consumer = Consumer(settings.confluent_config(**conf))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    records -= records % RAW_CONSUME_RECORDS  # whole consume() batches (see the docstring)
    seen = 0
    first_batch = 0
    started = 0.0
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while seen < records and time.monotonic() < deadline:
            messages = consumer.consume(RAW_CONSUME_RECORDS, 1.0)
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
) -> tuple[float, float]:
    """records/s over whole batches, and the seconds the partial last batch (the
    records past them, if any) took after them."""
    ingest = IngestSettings(
        group=f"bench-st-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        partitions=tuple(range(PARTITIONS)),
        batch_records=batch_records,
        dlq_suffix=None,
        column_builder=builder,
    )
    consumer = IngestConsumer(settings, ingest, RawDecoder(RECORD_BYTES))
    whole = records - records % batch_records  # whole batches (see the docstring)
    seen = 0
    first_batch = 0
    started = elapsed = last_at = 0.0
    timed = 0
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
            last_at = time.perf_counter()
            if seen >= whole and not elapsed:  # a remainder may come early (a slow fetch)
                elapsed = last_at - started
                timed = seen - first_batch
        tail_s = last_at - started - elapsed
    committed = sum(consumer.last_committed.values())
    if seen < records or committed != records or not elapsed:
        raise RuntimeError(f"streamtrain read {seen} and committed {committed} of {records}")
    return timed / elapsed, tail_s


def _queue_memory(settings: KafkaSettings, topic: str, queue_records: int) -> tuple[int, int]:
    """RSS growth and the queued records' own bytes once a worker's local queue is full."""
    ingest = IngestSettings(
        group=f"bench-mem-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        partitions=tuple(range(PARTITIONS)),
        queue_records=queue_records,
        dlq_suffix=None,
    )
    before = rss_bytes()
    consumer = IngestConsumer(settings, ingest, RawDecoder(RECORD_BYTES))
    with consumer:
        deadline = time.monotonic() + 60
        while not consumer.queue.full and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let librdkafka's pre-fetch settle after the pause
        grown = rss_bytes() - before
        assert isinstance(consumer.queue, LocalQueue)
        queued = consumer.queue.queued_bytes
    return grown, queued


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in comma_list(text)]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be positive integers: {text!r}")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--batch-records",
        type=_sizes,
        default=[512, 1024, 4096, 5000],
        help="comma-separated batch sizes, all measured in one run",
    )
    parser.add_argument("--queue-records", type=int, default=100_000)
    parser.add_argument("--accessor", action="store_true", help="also the accessor path")
    args = parser.parse_args()
    sizes: list[int] = args.batch_records
    with EmbeddedBroker() as broker:
        settings = broker.kafka_settings()
        topic = f"bench-ingest-{uuid.uuid4().hex[:8]}"
        create_topic(settings, topic, PARTITIONS)
        produce_rate = _produce(settings, topic, args.records)
        print(f"produced {args.records:,} records of {RECORD_BYTES} B: {produce_rate:,.0f}/s")
        builder = messages.active_builder()
        print(f"column builder: {builder}")
        raw_rates: list[float] = []
        st_rates: dict[int, list[float]] = {size: [] for size in sizes}
        tails: dict[int, list[float]] = {size: [] for size in sizes}
        accessor_rates: list[float] = []
        for round_no in range(1, args.rounds + 1):
            raw_rates.append(_raw(settings, topic, args.records, tuned=True))
            line = f"round {round_no}: raw {raw_rates[-1]:,.0f} records/s"
            for size in sizes:
                rate, tail_s = _streamtrain(settings, topic, args.records, size)
                st_rates[size].append(rate)
                tails[size].append(tail_s)
                line += f", batch {size} {rate:,.0f}"
            if args.accessor and builder == "c":
                accessor_rates.append(
                    _streamtrain(settings, topic, args.records, max(sizes), "python")[0]
                )
                line += f" (accessor path, batch {max(sizes)}: {accessor_rates[-1]:,.0f})"
            print(line, flush=True)
        default_rate = _raw(settings, topic, args.records, tuned=False)
        grown, queued = _queue_memory(settings, topic, args.queue_records)
    raw = statistics.median(raw_rates)
    rates = {size: statistics.median(st_rates[size]) for size in sizes}
    ratios = {size: rate / raw for size, rate in rates.items()}
    best = max(sizes, key=lambda size: rates[size])
    print(f"raw consume() loop, librdkafka default fetch properties: {default_rate:,.0f} records/s")
    print(f"raw consume() loop (median of {args.rounds}): {raw:,.0f} records/s")
    for size in sizes:
        print(
            f"streamtrain to acked numpy batches of {size:>5} (median of {args.rounds}): "
            f"{rates[size]:,.0f} records/s, ratio {ratios[size]:.3f}; the partial last "
            f"batch of {args.records % size} records came {max(tails[size]) * 1000:.0f} ms later"
        )
    if accessor_rates:
        accessor = statistics.median(accessor_rates)
        print(
            f"streamtrain on the accessor path (no C builder): {accessor:,.0f} records/s, "
            f"ratio {accessor / raw:.3f}"
        )
    bound = rss_bound_bytes(queued)
    print(
        f"worker with a full {args.queue_records:,}-record local queue: RSS "
        f"+{grown / 2**20:.1f} MiB; the queued records and their columns {queued / 2**20:.1f} "
        f"MiB; bound 2 x queued + {RSS_CONSTANT_MIB} MiB = {bound / 2**20:.1f} MiB "
        f"({'within' if grown <= bound else 'OVER'})"
    )
    per_size = " ".join(f"ratio_{size}={ratios[size]:.3f}" for size in sizes)
    print(
        f"ratio={min(ratios.values()):.3f} {per_size} best_batch_records={best} "
        f"streamtrain_records_per_s={rates[best]:.0f} raw_records_per_s={raw:.0f} "
        f"rss_growth_mib={grown / 2**20:.1f} queued_mib={queued / 2**20:.1f} "
        f"rss_bound_mib={bound / 2**20:.1f}"
    )


if __name__ == "__main__":
    main()
