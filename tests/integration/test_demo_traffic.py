"""The demo's traffic generator against the real broker: every planned record arrives."""

import os
import signal
import time

import numpy as np

from streamtrain.broker import EmbeddedBroker
from streamtrain.demo.traffic import TrafficGenerator, TrafficPlan
from streamtrain.forecast.trace import Trace
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


def test_the_generator_says_how_far_it_fell_behind_its_plan(broker):
    """A generator that wakes every 0.5 s finds about 0.5 s of traffic due each time;
    one that wakes every 20 ms finds far less. Either way every record arrives."""
    settings = broker.kafka_settings()
    flat = Trace(start_s=0.0, step_s=60, records_per_s=np.full(1440, 1.0))
    plan = TrafficPlan.from_trace(flat, duration_s=2, peak_records_per_s=200, partitions=2)
    behind = {}
    for tick_s in (0.02, 0.5):
        topic = f"demo-traffic-late-{time.monotonic_ns()}"
        create_topic(settings, topic, 2)
        generator = TrafficGenerator(settings, topic, plan, tick_s=tick_s)
        generator.start()
        generator.join(timeout=30)
        assert not generator.is_alive()
        assert generator.acknowledged.sum() == plan.total_records
        behind[tick_s] = generator.max_behind_s
    assert behind[0.5] >= 0.45  # due at 200 records/s for at least one sleep of 0.5 s
    assert behind[0.02] < behind[0.5]


def test_the_generator_says_how_far_the_brokers_acknowledgements_fell_behind():
    """A broker stopped (SIGSTOP) for a second mid-run acknowledges nothing then, though
    the generator hands every record over on time; once it goes on, every record arrives."""
    flat = Trace(start_s=0.0, step_s=60, records_per_s=np.full(1440, 1.0))
    plan = TrafficPlan.from_trace(flat, duration_s=3, peak_records_per_s=200, partitions=2)
    with EmbeddedBroker() as own:
        settings = own.kafka_settings()
        topic = f"demo-traffic-acks-{time.monotonic_ns()}"
        create_topic(settings, topic, 2)
        generator = TrafficGenerator(settings, topic, plan, tick_s=0.02)
        generator.start()
        time.sleep(1.0)
        os.kill(own.pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)
        finally:
            os.kill(own.pid, signal.SIGCONT)
        generator.join(timeout=30)
        assert not generator.is_alive()
        assert generator.failed == 0
        assert generator.acknowledged.sum() == plan.total_records
        assert generator.max_unacked_s >= 0.8  # a second without acknowledgements
        assert generator.max_unacked_s >= generator.max_behind_s
