"""Ingest's per-batch cost, in measures a shared machine does not distort much.

Run: .venv/bin/python -m benchmarks.ingest_path [--mode path|threads|both]
     [--batch-records 512,1024,4096,5000] [--rounds 7]

``benchmarks/ingest.py`` times records/s against a raw confluent-kafka loop, which on a
machine shared with other jobs says more about the load than about the code. This one
measures CPU time instead, for the breakdown in docs/benchmarks.md ("Ingest"):

* ``path`` (no broker): the fetch thread's step (``IngestConsumer._batch_up``: batcher,
  columns, ownership, tracker hand-out, queue) and the trainer's (``next_batch`` and
  ``ack``) in one thread, on 200,000 test-constructed 200-byte Messages in 8 partitions
  delivered as ``consume()`` delivers them (10,000 at a time, stretches of 1,250 per
  partition); CPU µs per batch, split into fetch / ``next_batch`` / ``ack``. The
  baseline in the same run: the raw loop's own per-message Python (``error()`` and
  ``value()`` on each Message), in ns a record.
* ``threads`` (embedded broker, 1M records): CPU seconds of the Python threads, the raw
  loop's one thread against streamtrain's trainer plus fetch thread; on a quiet machine
  both are bound by those threads (they share the GIL), so the quotient estimates the
  benchmark's ratio; it leaves out the overlap the two threads gain and so errs low.

Medians over ``--rounds``. The last line is machine-readable:
``raw_touch_ns_per_record=<x> path_us_per_batch_<size>=<x>... path_ns_per_record_<size>=<x>...
thread_ratio_<size>=<x>...`` (the keys of the modes run).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from benchmarks.ingest import PARTITIONS, RECORD_BYTES, _produce, _sizes
from streamtrain.broker import EmbeddedBroker
from streamtrain.config import KafkaSettings
from streamtrain.heap import keep_large_buffers_in_heap
from streamtrain.ingest import IngestConsumer, IngestSettings, RawDecoder
from streamtrain.kafka import create_topic

TOPIC = "path"
CONSUME_RECORDS = 10_000
STRETCH_RECORDS = 1_250
PATH_RECORDS = 200_000
THREAD_RECORDS = 1_000_000


def _messages(total: int) -> list[Message]:
    payload = b"r" * RECORD_BYTES
    messages: list[Message] = []
    next_offset = [0] * PARTITIONS
    partition = 0
    while len(messages) < total:
        for _ in range(STRETCH_RECORDS):
            offset = next_offset[partition]
            messages.append(
                Message(
                    topic=TOPIC,
                    partition=partition,
                    offset=offset,
                    value=payload,
                    timestamp=(1, 1_700_000_000_000 + offset),
                )
            )
            next_offset[partition] += 1
        partition = (partition + 1) % PARTITIONS
    return messages


def _raw_touch_ns(messages: list[Message]) -> float:
    started = time.thread_time()
    for message in messages:
        if message.error() is None:
            message.value()
    return (time.thread_time() - started) / len(messages) * 1e9


def _path_round(messages: list[Message], batch_records: int) -> tuple[float, float, float]:
    """CPU µs per batch of the fetch step, ``next_batch`` and ``ack``."""
    settings = IngestSettings(
        group="path",
        topics=(TOPIC,),
        partitions=tuple(range(PARTITIONS)),
        batch_records=batch_records,
        dlq_suffix=None,
    )
    consumer = IngestConsumer(KafkaSettings(bootstrap="127.0.0.1:1"), settings, RawDecoder())
    for partition in range(PARTITIONS):  # what start() does from the committed offsets
        consumer.tracker.assign(TOPIC, partition, -1)
    consumer._ownership.update(consumer.tracker.assigned())  # no broker: what start() tracks
    clock = time.thread_time
    fetch = take = ack = 0.0
    batches = records = 0
    for start in range(0, len(messages) + CONSUME_RECORDS, CONSUME_RECORDS):
        chunk = messages[start : start + CONSUME_RECORDS]  # empty at the end: the remainder
        began = clock()
        consumer._batch_up(chunk)  # the fetch thread's step
        fetch += clock() - began
        while True:
            began = clock()
            batch = consumer.next_batch(timeout_s=0)
            take += clock() - began
            if batch is None:
                break
            began = clock()
            batch.ack()
            ack += clock() - began
            batches += 1
            records += len(batch)
    if records != len(messages) or sum(consumer.tracker.committable().values()) != records:
        raise RuntimeError(f"the path handed out {records} of {len(messages)} records")
    return fetch / batches * 1e6, take / batches * 1e6, ack / batches * 1e6


def _thread_cpu_s(thread: threading.Thread | None) -> float:
    """CPU time of another thread of this process (``/proc/self/task/<id>/schedstat``)."""
    if thread is None or thread.native_id is None:
        return 0.0
    try:
        text = Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text()
    except OSError:
        return 0.0
    return int(text.split()[0]) / 1e9


def _raw_thread_s(kafka: KafkaSettings, topic: str) -> float:
    fetch = IngestSettings(group="g", topics=(topic,)).fetch_properties()
    consumer = Consumer(
        kafka.confluent_config(
            **{"group.id": f"raw-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, **fetch}
        )
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    started = time.thread_time()
    try:
        while seen < THREAD_RECORDS:
            messages = consumer.consume(CONSUME_RECORDS, 1.0)
            for message in messages:
                if message.error() is None:
                    message.value()
            seen += len(messages)
        return time.thread_time() - started
    finally:
        consumer.close()


def _streamtrain_threads_s(kafka: KafkaSettings, topic: str, batch_records: int) -> float:
    settings = IngestSettings(
        group=f"threads-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        partitions=tuple(range(PARTITIONS)),
        batch_records=batch_records,
        dlq_suffix=None,
    )
    consumer = IngestConsumer(kafka, settings, RawDecoder(RECORD_BYTES))
    seen = 0
    with consumer:
        fetch_thread = next(
            (t for t in threading.enumerate() if t.name.startswith("streamtrain-fetch-")), None
        )
        started = time.thread_time()
        while seen < THREAD_RECORDS:
            batch = consumer.next_batch(timeout_s=1.0)
            if batch is None:
                continue
            batch.ack()
            seen += len(batch)
        trainer_s = time.thread_time() - started
        fetch_s = _thread_cpu_s(fetch_thread)
    return trainer_s + fetch_s


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("path", "threads", "both"), default="both")
    parser.add_argument("--batch-records", type=_sizes, default=[512, 1024, 4096, 5000])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sizes: list[int] = args.batch_records
    keep_large_buffers_in_heap()
    keys: list[str] = []
    if args.mode in ("path", "both"):
        messages = _messages(PATH_RECORDS)
        touch = statistics.median(_raw_touch_ns(messages) for _ in range(args.rounds))
        print(f"raw loop's per-message Python (error(), value()): {touch:.1f} ns a record")
        keys.append(f"raw_touch_ns_per_record={touch:.1f}")
        for size in sizes:
            parts = [_path_round(messages, size) for _ in range(args.rounds)]
            fetch, take, ack = (statistics.median(p[i] for p in parts) for i in range(3))
            total = fetch + take + ack
            print(
                f"batch {size:>5}: {total:.1f} us a batch ({total / size * 1000:.1f} ns a "
                f"record): fetch step {fetch:.1f}, next_batch {take:.1f}, ack {ack:.1f}"
            )
            keys += [
                f"path_us_per_batch_{size}={total:.1f}",
                f"path_ns_per_record_{size}={total / size * 1000:.1f}",
            ]
    if args.mode in ("threads", "both"):
        with EmbeddedBroker() as broker:
            kafka = broker.kafka_settings()
            topic = f"bench-path-{uuid.uuid4().hex[:8]}"
            create_topic(kafka, topic, PARTITIONS)
            _produce(kafka, topic, THREAD_RECORDS)
            thread_rounds = max(1, min(args.rounds, 3))
            raw: list[float] = []
            ours: dict[int, list[float]] = {size: [] for size in sizes}
            for _ in range(thread_rounds):
                raw.append(_raw_thread_s(kafka, topic))
                for size in sizes:
                    ours[size].append(_streamtrain_threads_s(kafka, topic, size))
        raw_s = statistics.median(raw)
        print(f"raw loop thread: {raw_s:.3f} CPU s per {THREAD_RECORDS:,} records")
        for size in sizes:
            ours_s = statistics.median(ours[size])
            print(
                f"batch {size:>5}: trainer + fetch thread {ours_s:.3f} CPU s, "
                f"raw / streamtrain {raw_s / ours_s:.3f}"
            )
            keys.append(f"thread_ratio_{size}={raw_s / ours_s:.3f}")
    print(" ".join(keys))


if __name__ == "__main__":
    main()
