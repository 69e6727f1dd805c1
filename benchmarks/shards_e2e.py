"""The end-to-end part of ``benchmarks.shards`` (``--e2e``): a real backlog drained.

The embedded broker; a 4-partition topic with ``records`` records (unique int64 ids)
waiting before anything else starts; ``streamtrain lag run --shards-job`` attached to
it; two ``streamtrain worker --assignment shards`` processes running
``benchmarks/scaling_app.py`` without a speed limit (it records every id it trains
before the batch is acknowledged). Measured: the largest value the control app wrote to
its shard table's changelog, whether the control app stayed up, the seconds to drain
the backlog (every id trained and every partition committed to its end) and the ids
never trained.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.kafka import create_topic
from streamtrain.process import stop_child

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4
JOB = "backlog"
TOPIC = "backlog-data"
APP_ID = "backlog-control"


def _produce(kafka: KafkaSettings, records: int) -> None:
    producer = Producer(kafka.confluent_config(**{"linger.ms": 50, "batch.num.messages": 10_000}))
    step = 100_000
    for first in range(0, records, step):
        for i in range(first, min(records, first + step)):
            while True:
                try:
                    producer.produce(TOPIC, int(i).to_bytes(8, "little"), partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
        print(f"  produced {min(records, first + step):,} of {records:,}", file=sys.stderr)
    producer.flush(120)


def _committed(kafka: KafkaSettings) -> int:
    consumer = Consumer(kafka.confluent_config(**{"group.id": JOB}))
    try:
        found = consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in found)


def _trained(out: Path) -> np.ndarray:
    parts = [np.fromfile(path, dtype="<i8") for path in out.glob("*.ids")]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)


def _changelog_max_bytes(kafka: KafkaSettings) -> int:
    topic = f"{APP_ID}-shards-changelog"
    consumer = Consumer(
        kafka.confluent_config(**{"group.id": "backlog-reader", "enable.auto.commit": False})
    )
    largest, deadline = 0, time.monotonic() + 60
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        idle = 0
        while time.monotonic() < deadline and idle < 4:
            messages = consumer.consume(10_000, 0.5)
            idle = 0 if messages else idle + 1
            for message in messages:
                value = message.value() if message.error() is None else None
                if value:
                    largest = max(largest, len(value))
    finally:
        consumer.close()
    return largest


def run_e2e(records: int, timeout_s: float = 3_600.0) -> dict[str, float]:
    """The end-to-end run (module docstring); its measurements."""
    with (
        tempfile.TemporaryDirectory(prefix="streamtrain-shards-") as tmp,
        EmbeddedBroker(EmbeddedBrokerSettings()) as broker,
    ):
        kafka = KafkaSettings(broker.bootstrap)
        create_topic(kafka, TOPIC, PARTITIONS)
        print(f"end to end: producing a backlog of {records:,} records", file=sys.stderr)
        _produce(kafka, records)
        out = Path(tmp) / "trained"
        out.mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SCALING_OUT_DIR": str(out),
            "SCALING_CAPACITY_RECORDS_PER_S": "1e12",
        }
        streamtrain = str(Path(sys.executable).parent / "streamtrain")
        control_log = open(Path(tmp) / "control.log", "wb")  # noqa: SIM115 - closed below
        control = subprocess.Popen(
            [
                streamtrain,
                "lag",
                "run",
                "--bootstrap",
                broker.bootstrap,
                "--group",
                JOB,
                "--topic",
                TOPIC,
                "--shards-job",
                JOB,
                "--app-id",
                APP_ID,
                "--data-dir",
                str(Path(tmp) / "control-data"),
                "--web-port",
                str(free_port()),
                "--reports-topic",
                f"{JOB}.reports",
                "--alerts-topic",
                f"{JOB}.alerts",
            ],
            stdout=control_log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        workers = [
            subprocess.Popen(
                [
                    streamtrain,
                    "worker",
                    "--bootstrap",
                    broker.bootstrap,
                    "--topic",
                    TOPIC,
                    "--group",
                    JOB,
                    "--worker-id",
                    f"w{i}",
                    "--assignment",
                    "shards",
                    "--entry",
                    "scaling_app:make",
                    "--app-dir",
                    str(REPO / "benchmarks"),
                    "--batch-records",
                    "5000",
                    "--throughput-topic",
                    "",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            for i in range(2)
        ]
        started = time.monotonic()
        drained_s = float("nan")
        control_up = True
        try:
            while time.monotonic() - started < timeout_s:
                time.sleep(2.0)
                if control.poll() is not None:
                    control_up = False
                    break
                committed = _committed(kafka)
                print(
                    f"  {time.monotonic() - started:.0f} s: committed {committed:,}",
                    file=sys.stderr,
                )
                if committed >= records and _trained(out).size >= records:
                    drained_s = time.monotonic() - started
                    break
        finally:
            for worker in workers:
                stop_child(worker, "a worker", 30.0)
            stop_child(control, "the control app", 30.0)
            control_log.close()
        trained = _trained(out)
        lost = records - int(np.isin(np.arange(records), trained).sum())
        return {
            "e2e_records": records,
            "e2e_max_value_bytes": _changelog_max_bytes(kafka),
            "e2e_control_up": int(control_up),
            "e2e_drain_s": round(drained_s, 1),
            "e2e_lost": lost,
        }
