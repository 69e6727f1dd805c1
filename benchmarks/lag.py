"""One lag tick for 800 partitions x 4 groups on the embedded broker.

Run: .venv/bin/python -m benchmarks.lag [--partitions 800] [--groups 4] [--ticks 30]

Set-up: one topic of ``--partitions`` partitions with a few records each, ``--groups``
groups with committed offsets on every partition. Measured, median over ``--ticks``:

* baseline: the raw broker calls a tick needs, with plain confluent-kafka: one
  ListOffsets (latest) for all partitions and one OffsetFetch per group, in flight
  together, waited for synchronously;
* tick: ``LagMonitor.tick()`` (metadata, ListOffsets latest and earliest, OffsetFetch
  per group, the pure compute in a thread, alerts) plus publishing one ``LagReport``
  per group (protobuf encode and produce, acknowledged);
* compute: the pure compute alone (``compute_topics_lag`` for every group, columnar
  input, status tracking on), on the same snapshots.

The last line is machine-readable: ``tick_ms=<x> compute_ms=<x>`` followed by the
baseline and the ratio tick / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from streamtrain.broker import EmbeddedBroker
from streamtrain.kafka import create_topic
from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import compute_topics_lag
from streamtrain.lag.monitor import LagMonitor, MonitorSettings
from streamtrain.lag.offsets import OffsetsReader, OffsetsSnapshot
from streamtrain.lag.report import to_proto
from streamtrain.lag.status import StatusTracker


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=800)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--ticks", type=int, default=30)
    args = parser.parse_args()
    topic = "bench-lag"
    groups = [f"group-{g}" for g in range(args.groups)]
    with EmbeddedBroker() as broker:
        settings = broker.kafka_settings()
        create_topic(settings, topic, args.partitions)
        create_topic(settings, "bench-lag-reports", 1)
        _progress(f"producing to {args.partitions} partitions and committing for {groups}")
        producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
        for p in range(args.partitions):
            for _ in range(3):
                producer.produce(topic, value=b"x" * 100, partition=p)
        producer.flush(60)
        admin = AdminClient(settings.confluent_config())
        for g, group in enumerate(groups):
            offsets = [TopicPartition(topic, p, (p + g) % 3) for p in range(args.partitions)]
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])[
                group
            ].result(30)

        tps = [TopicPartition(topic, p) for p in range(args.partitions)]
        baseline = []
        for _ in range(args.ticks):
            started = time.perf_counter()
            futures = list(admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}).values())
            for group in groups:
                futures.append(
                    admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
                )
            for future in futures:
                future.result(30)
            baseline.append((time.perf_counter() - started) * 1000)

        reader = OffsetsReader(settings, groups=groups, topics=[topic])
        monitor = LagMonitor(reader, MonitorSettings())

        async def ticks() -> tuple[list[float], list[OffsetsSnapshot]]:
            times: list[float] = []
            snapshots: list[OffsetsSnapshot] = []
            for _ in range(args.ticks):
                started = time.perf_counter()
                tick = await monitor.tick()
                if tick.error is not None:
                    raise SystemExit(f"tick failed: {tick.error}")
                for group, lag in tick.results.items():
                    producer.produce(
                        "bench-lag-reports",
                        key=group.encode(),
                        value=to_proto(lag).SerializeToString(),
                    )
                await asyncio.to_thread(producer.flush, 30)
                times.append((time.perf_counter() - started) * 1000)
                snapshots.append(await reader.snapshot())
                await asyncio.sleep(0.05)
            return times, snapshots

        tick_times, snapshots = asyncio.run(ticks())

    history, tracker = HwmHistory(), StatusTracker()
    compute = []
    for snapshot in snapshots:
        now = snapshot.observed_at_s
        hwms = snapshot.high_watermarks
        started = time.perf_counter()
        history.record(topic, now, {p: hwms[(topic, p)] for p in range(args.partitions)})
        for group in groups:
            compute_topics_lag(
                group, snapshot.topic_offsets(group), history, now, status_tracker=tracker
            )
        compute.append((time.perf_counter() - started) * 1000)

    tick_ms = statistics.median(tick_times)
    compute_ms = statistics.median(compute)
    base_ms = statistics.median(baseline)
    print(f"{args.partitions} partitions x {len(groups)} groups, median of {args.ticks}:")
    print(f"  baseline (raw ListOffsets + OffsetFetch, confluent-kafka): {base_ms:.1f} ms")
    print(f"  tick (fetch + compute + publish):                         {tick_ms:.1f} ms")
    print(f"  compute alone:                                            {compute_ms:.2f} ms")
    print(
        f"tick_ms={tick_ms:.1f} compute_ms={compute_ms:.2f} "
        f"baseline_ms={base_ms:.1f} ratio={tick_ms / base_ms:.2f}"
    )


if __name__ == "__main__":
    main()
