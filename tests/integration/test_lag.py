"""The lag monitor against the real embedded broker: exact records, seconds, edge cases."""

import asyncio
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streamtrain.kafka import create_topic
from streamtrain.lag.monitor import LagMonitor, MonitorSettings, one_shot_lag
from streamtrain.lag.offsets import OffsetsReader
from streamtrain.proto import control_plane_pb2 as pb


def _name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _exact_producer(settings, delivered=None):
    """One record per batch: the broker's HWM is exact only then."""

    def on_delivery(err, msg):
        if err is None and delivered is not None:
            delivered[(msg.partition(), msg.offset())] = msg.timestamp()[1] / 1000.0

    conf = settings.confluent_config(**{"batch.num.messages": 1, "linger.ms": 0})
    return Producer(conf), on_delivery


def _commit(settings, group, offsets):
    consumer = Consumer(settings.confluent_config(**{"group.id": group}))
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def test_lag_records_equal_hwm_minus_committed_exactly(broker):
    settings = broker.kafka_settings()
    topic, group = _name("lagx"), _name("g")
    create_topic(settings, topic, 8)
    producer, _ = _exact_producer(settings)
    produced = {p: 5 + 7 * p for p in range(8)}
    for p, count in produced.items():
        for i in range(count):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    committed = {(topic, p): (3 * p) % (produced[p] + 1) for p in range(7)}  # 7: no commit
    _commit(settings, group, committed)

    lag, snapshot = one_shot_lag(OffsetsReader(settings, groups=[group]), group)

    rows = {(t, p): row for t, p, *row in lag.rows()}
    assert len(rows) == 8  # every partition of the topics the group committed on
    assert snapshot.group_topics[group] == (topic,)
    for p in range(8):
        committed_at, hwm, lag_records, lag_s, rate, _ = rows[(topic, p)]
        assert hwm == produced[p]
        if p < 7:
            assert committed_at == committed[(topic, p)]
            assert lag_records == produced[p] - committed[(topic, p)]
        else:
            assert committed_at is None and lag_records == produced[p]  # HWM - low watermark
        assert rate is None  # one snapshot: no CPS
        assert lag_s is not None and lag_s >= 0
        if lag_records == 0:
            assert lag_s == 0.0
    assert lag.total_lag_records == sum(produced.values()) - sum(committed.values())


def test_lag_seconds_track_a_stopped_consumer_and_idle_partitions_are_zero(broker):
    settings = broker.kafka_settings()
    topic, group = _name("lags"), _name("g")
    create_topic(settings, topic, 2)
    delivered: dict[tuple[int, int], float] = {}
    producer, on_delivery = _exact_producer(settings, delivered)
    for _ in range(3):  # partition 1: a few records, consumed, then idle
        producer.produce(topic, value=b"idle", partition=1, on_delivery=on_delivery)
    producer.flush(10)
    _commit(settings, group, {(topic, 1): 3})
    stop = threading.Event()

    def produce_steadily():
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            producer.produce(topic, value=b"x", partition=0, on_delivery=on_delivery)
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(10)

    thread = threading.Thread(target=produce_steadily)
    thread.start()
    try:
        monitor = LagMonitor(
            OffsetsReader(settings, groups=[group], topics=[topic]),
            MonitorSettings(tick_s=0.5, history_step_s=60),
        )

        async def run():
            consumed_until = time.monotonic() + 3.0
            stopped_at_offset = None
            checks = []
            for _ in range(20):
                tick = await monitor.tick()
                assert tick.error is None
                hwm = tick.results[group].rows()[0][3]
                if time.monotonic() < consumed_until:  # the consumer keeps up...
                    _commit(settings, group, {(topic, 0): hwm})
                    stopped_at_offset = hwm
                else:  # ...then stops: its lag is the age of the record at its offset
                    producer.poll(0)
                    assert stopped_at_offset is not None
                    produced_at = delivered.get((0, stopped_at_offset))
                    rows = {p: row for _, p, *row in tick.results[group].rows()}
                    if produced_at is not None and rows[0][0] == stopped_at_offset:
                        checks.append((rows[0][3], tick.observed_at_s - produced_at))
                    assert rows[1][2] == 0 and rows[1][3] == 0.0  # idle, caught up
                await asyncio.sleep(0.5)
            return checks

        checks = asyncio.run(run())
    finally:
        stop.set()
        thread.join(timeout=15)
    assert len(checks) >= 5
    assert max(truth for _, truth in checks) > 3.0  # the consumer stopped for seconds
    for measured, truth in checks:
        assert measured == pytest.approx(truth, abs=1.0)


def test_unknown_group_missing_and_deleted_topics_are_reported_not_fatal(broker):
    settings = broker.kafka_settings()
    topic, group = _name("lagd"), _name("g")
    create_topic(settings, topic, 2)
    _commit(settings, group, {(topic, 0): 0})
    monitor = LagMonitor(
        OffsetsReader(settings, groups=[group, "no-such-group"], topics=()),
        MonitorSettings(),
    )
    also_missing = LagMonitor(OffsetsReader(settings, groups=[group], topics=["no-such-topic"]))
    watching = LagMonitor(OffsetsReader(settings, groups=[group], topics=[topic]))

    async def run():
        first = await monitor.tick()
        missing = await also_missing.tick()
        before = await watching.tick()
        assert before.error is None and before.results[group].rows()
        admin = AdminClient(settings.confluent_config())
        admin.delete_topics([topic])[topic].result(10)
        after = None
        for _ in range(20):
            after = await watching.tick()
            if topic in after.missing_topics:
                break
            await asyncio.sleep(0.25)
        return first, missing, after

    first, missing, after = asyncio.run(run())
    assert first.error is None
    assert first.results["no-such-group"].rows() == []
    messages = [a.message for a in first.alerts if a.kind == pb.Alert.CONTROL_APP]
    assert any("no-such-group" in m and "no committed offsets" in m for m in messages)
    assert missing.missing_topics == ("no-such-topic",)
    assert any("no-such-topic" in a.message for a in missing.alerts)
    assert after is not None and after.error is None and topic in after.missing_topics
    assert any(topic in a.message and "does not exist" in a.message for a in after.alerts)
