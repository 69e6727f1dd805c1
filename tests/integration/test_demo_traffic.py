"""The demo's traffic generator against the real broker: every planned record arrives."""

import time

import numpy as np

from streamtrain.demo.traffic import TrafficGenerator, TrafficPlan
from streamtrain.ingest.example import CTR_RECORD
from streamtrain.kafka import create_topic
from tests.integration.http_kafka import read_topic


def test_generator_produces_the_plan_with_unique_ids(broker):
    settings = broker.kafka_settings()
    topic = f"demo-traffic-{time.monotonic_ns()}"
    create_topic(settings, topic, 4)
    plan = TrafficPlan.from_trace(duration_s=3, peak_records_per_s=400, partitions=4, seed=1)
    generator = TrafficGenerator(settings, topic, plan, tick_s=0.02)
    generator.start()
    generator.join(timeout=30)
    assert not generator.is_alive()
    assert generator.failed == 0
    assert generator.produced_ids == plan.total_records
    assert generator.acknowledged.tolist() == plan.due(3.0).tolist()
    ids = []
    for partition in range(4):
        values = read_topic(settings, topic, max_s=10.0, partition=partition)
        assert len(values) == plan.due(3.0)[partition]
        ids += np.frombuffer(b"".join(values), dtype=CTR_RECORD)["id"].tolist()
    assert sorted(ids) == list(range(plan.total_records))
