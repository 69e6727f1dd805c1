"""Embedded broker facts, measured: start-up time, produce rates, watermark exactness and
what consumers reading the topic cost it.

Run: .venv/bin/python -m benchmarks.broker [--records N] [--readers R]

Produces N records of 200 bytes into one partition twice, with a batching producer
(librdkafka defaults) and with ``batch.num.messages=1``, and reports each rate and
whether the high watermark the broker reports equals the records produced.

Readers: R consumers (threads of this process) assigned at the end of a 16-partition
topic. Idle (nothing produced): the broker's CPU (from ``/proc``, % of one core over 10 s)
with ``fetch.wait.max.ms`` 10, 100 and 500; every fetch that finds nothing costs the
broker the same, so the share falls with the wait. Growth: the broker's CPU per
ListOffsets(latest) of the 16 partitions and per probe (a consumer assigned at each
partition's last record, reading it), with 1, 2,000 and 8,000 one-record batches in
each partition. The last line is machine-readable:
``startup_ms=<x> batched_records_per_s=<n> single_records_per_s=<n> ratio=<single/batched>
batched_hwm_exact=<bool> single_hwm_exact=<bool> idle_cpu_pct_wait10=<x>
idle_cpu_pct_wait100=<x> idle_cpu_pct_wait500=<x> list_offsets_cpu_ms_<batches>=<x>
probe_cpu_ms_<batches>=<x>`` (for each of the three sizes).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from streamtrain.broker import EmbeddedBroker
from streamtrain.config import KafkaSettings
from streamtrain.kafka import create_topic


def _produce_one(producer: Producer, topic: str, value: bytes, partition: int) -> None:
    """Produce one record, letting deliveries drain the local queue while it is full."""
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)


def _produce(settings: KafkaSettings, records: int, **conf: object) -> tuple[float, bool]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(settings, topic, 1)
    producer = Producer(settings.confluent_config(**conf))
    payload = b"x" * 200
    started = time.perf_counter()
    for _ in range(records):
        _produce_one(producer, topic, payload, 0)
    if producer.flush(120) != 0:
        raise RuntimeError("producer did not deliver every record within 120 s")
    elapsed = time.perf_counter() - started
    consumer = Consumer(settings.confluent_config(**{"group.id": "bench-watermarks"}))
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return records / elapsed, high == records


READ_PARTITIONS = 16
GROWTH_BATCHES = (1, 2000, 8000)  # one-record batches per partition


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _readers(settings: KafkaSettings, topic: str, count: int, **conf: object) -> Iterator[None]:
    """``count`` consumers reading every partition of ``topic`` from its end until exit."""
    stop = threading.Event()
    ready = threading.Barrier(count + 1)

    def read(index: int) -> None:
        consumer = Consumer(
            settings.confluent_config(
                **{"group.id": f"bench-reader-{index}", "enable.auto.commit": False, **conf}
            )
        )
        try:
            ends = [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(READ_PARTITIONS)
            ]
            consumer.assign([TopicPartition(topic, p, end) for p, end in enumerate(ends)])
            ready.wait(30)
            while not stop.is_set():
                consumer.consume(500, 0.1)
        finally:
            consumer.close()

    threads = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        ready.wait(30)
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def _idle_cpu_pct(broker: EmbeddedBroker, readers: int, wait_ms: int) -> float:
    """The broker's CPU (% of a core over 10 s) while ``readers`` idle at a topic's end."""
    settings = broker.kafka_settings()
    topic = f"bench-idle-{uuid.uuid4().hex[:8]}"
    create_topic(settings, topic, READ_PARTITIONS)
    with _readers(settings, topic, readers, **{"fetch.wait.max.ms": wait_ms}):
        time.sleep(2.0)  # the first fetches and their metadata
        before = _cpu_s(broker.pid)
        time.sleep(10.0)
        return 100.0 * (_cpu_s(broker.pid) - before) / 10.0


def _request_cpu_ms(broker: EmbeddedBroker, batches: int) -> tuple[float, float]:
    """The broker's CPU (ms) per ListOffsets(latest) of 16 partitions and per probe (a
    consumer assigned at the last record of each and reading it), once each partition
    holds ``batches`` one-record batches."""
    settings = broker.kafka_settings()
    topic = f"bench-grow-{uuid.uuid4().hex[:8]}"
    create_topic(settings, topic, READ_PARTITIONS)
    producer = Producer(settings.confluent_config(**{"batch.num.messages": 1, "linger.ms": 0}))
    for _ in range(batches):
        for partition in range(READ_PARTITIONS):
            _produce_one(producer, topic, b"x" * 200, partition)
    if producer.flush(300) != 0:
        raise RuntimeError("producer did not deliver every record within 300 s")
    admin = AdminClient(settings.confluent_config())
    partitions = [TopicPartition(topic, p) for p in range(READ_PARTITIONS)]
    before, calls, until = _cpu_s(broker.pid), 0, time.monotonic() + 5.0
    while time.monotonic() < until:
        futures = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions}, request_timeout=30
        )
        for future in futures.values():
            future.result()
        calls += 1
    list_ms = 1000.0 * (_cpu_s(broker.pid) - before) / calls
    probe = Consumer(
        settings.confluent_config(
            **{"group.id": "bench-probe", "enable.auto.commit": False, "fetch.wait.max.ms": 10}
        )
    )
    try:
        before, calls, until = _cpu_s(broker.pid), 0, time.monotonic() + 5.0
        while time.monotonic() < until:
            probe.assign([TopicPartition(topic, p, batches - 1) for p in range(READ_PARTITIONS)])
            got, deadline = 0, time.monotonic() + 5.0
            while got < READ_PARTITIONS and time.monotonic() < deadline:
                got += len(probe.consume(100, 0.02))
            probe.unassign()
            calls += 1
        probe_ms = 1000.0 * (_cpu_s(broker.pid) - before) / calls
    finally:
        probe.close()
    return list_ms, probe_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--readers", type=int, default=8)
    args = parser.parse_args()
    if args.records < 4 or args.readers < 1:
        parser.error("--records must be at least 4 and --readers at least 1")
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        startup_ms = (time.perf_counter() - started) * 1000
        settings = broker.kafka_settings()
        batched_rate, batched_exact = _produce(settings, args.records)
        single_rate, single_exact = _produce(settings, args.records, **{"batch.num.messages": 1})
        idle = {wait: _idle_cpu_pct(broker, args.readers, wait) for wait in (10, 100, 500)}
        grown = {batches: _request_cpu_ms(broker, batches) for batches in GROWTH_BATCHES}
    print(f"embedded broker start-up (spawn to first Metadata answer): {startup_ms:.0f} ms")
    print(f"batching producer:        {batched_rate:,.0f} records/s, HWM exact: {batched_exact}")
    print(f"batch.num.messages=1:     {single_rate:,.0f} records/s, HWM exact: {single_exact}")
    for wait, pct in idle.items():
        print(
            f"{args.readers} readers idle, fetch.wait.max.ms={wait}: "
            f"broker at {pct:.0f} % of a core"
        )
    for batches, (list_ms, probe_ms) in grown.items():
        print(
            f"{batches:,} batches a partition: ListOffsets of {READ_PARTITIONS} partitions "
            f"{list_ms:.2f} ms of broker CPU, a probe of them {probe_ms:.2f} ms"
        )
    print(
        f"startup_ms={startup_ms:.0f} batched_records_per_s={batched_rate:.0f} "
        f"single_records_per_s={single_rate:.0f} ratio={single_rate / batched_rate:.3f} "
        f"batched_hwm_exact={batched_exact} single_hwm_exact={single_exact} "
        + " ".join(f"idle_cpu_pct_wait{wait}={pct:.1f}" for wait, pct in idle.items())
        + " "
        + " ".join(
            f"list_offsets_cpu_ms_{batches}={list_ms:.2f} probe_cpu_ms_{batches}={probe_ms:.2f}"
            for batches, (list_ms, probe_ms) in grown.items()
        )
    )


if __name__ == "__main__":
    main()
