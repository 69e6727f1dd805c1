"""IngestConsumer against the embedded broker: at-least-once commits, rebalances, dead
letters, throughput samples and Prometheus metrics."""

import json
import time
import urllib.request
import uuid
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.ingest import (
    Batch,
    Field,
    IngestConsumer,
    IngestSettings,
    JsonDecoder,
    ProtobufDecoder,
    RawDecoder,
    WorkerMetrics,
)
from streamtrain.ingest.reporting import serve_metrics
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import decode
from streamtrain.worker import WorkerRun, run_worker

FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}
DEADLINE_S = 60


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(settings, topic, records):
    """``records``: (partition, value) pairs, produced in order; returns their offsets."""
    offsets = {}

    def delivered(err, msg):
        assert err is None, err
        offsets[msg.value()] = (msg.partition(), msg.offset())

    producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
    for partition, value in records:
        producer.produce(topic, value, partition=partition, on_delivery=delivered)
    assert producer.flush(30) == 0
    return offsets


def committed_on_broker(settings, group, topic, partitions):
    consumer = Consumer(settings.confluent_config(**{"group.id": group}))
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def drain(consumer, expected, *, ack=True, deadline_s=DEADLINE_S):
    """Batches from ``consumer`` until ``expected`` records came (bounded in time)."""
    batches: list[Batch] = []
    deadline = time.monotonic() + deadline_s
    while sum(len(b) for b in batches) < expected and time.monotonic() < deadline:
        batch = consumer.next_batch(timeout_s=0.5)
        if batch is None:
            continue
        batches.append(batch)
        if ack:
            batch.ack()
    return batches


def test_commits_only_the_acknowledged_prefix_and_the_next_reader_resumes_there(broker):
    settings = broker.kafka_settings()
    topic, group = unique("ingest-prefix"), unique("group")
    create_topic(settings, topic, 2)
    values = [(i % 2, json.dumps({"id": i}).encode()) for i in range(200)]
    produce(settings, topic, values)
    ingest = IngestSettings(
        group=group,
        topics=(topic,),
        partitions=(0, 1),
        batch_records=10,
        auto_ack=False,
        commit_interval_s=0.2,
    )
    with IngestConsumer(settings, ingest, JsonDecoder([Field("id", np.int64)])) as first:
        batches = drain(first, 200, ack=False)
        assert sum(len(b) for b in batches) == 200
        held = batches[3]  # this one's step "did not finish"
        for batch in batches:
            if batch is not held:
                batch.ack()
    expected = {}
    for p in (0, 1):
        unacked = held.records.offsets[held.records.partitions == p]
        expected[p] = int(unacked.min()) if unacked.size else 100
    assert expected != {0: 100, 1: 100}
    assert committed_on_broker(settings, group, topic, [0, 1]) == expected
    assert {p: o for (_, p), o in first.last_committed.items()} == expected

    with IngestConsumer(settings, ingest, JsonDecoder([Field("id", np.int64)])) as second:
        rest = drain(second, 200 - sum(expected.values()))
    firsts: dict[int, int] = {}
    for batch in rest:
        for p, o in zip(
            batch.records.partitions.tolist(), batch.records.offsets.tolist(), strict=True
        ):
            firsts[p] = min(o, firsts.get(p, o))
    assert {p: firsts.get(p, 100) for p in (0, 1)} == expected  # resumed at the committed offset
    assert sum(len(b) for b in rest) == 200 - sum(expected.values())  # and read nothing twice
    assert committed_on_broker(settings, group, topic, [0, 1]) == {0: 100, 1: 100}


@pytest.mark.parametrize("a_queue", [100_000, 40], ids=["roomy-queue", "paused-by-full-queue"])
def test_rebalance_drops_revoked_records_and_the_new_owner_resumes_from_the_commit(broker, a_queue):
    # With a 40-record queue A has paused fetching when the rebalance comes: librdkafka
    # keeps a partition's pause across a revoke and re-assign, so A must clear it.
    settings = broker.kafka_settings()
    topic, group = unique("ingest-rebalance"), unique("group")
    partitions = 8
    create_topic(settings, topic, partitions)
    offsets = produce(settings, topic, [(i % partitions, f"{i}".encode()) for i in range(800)])
    assert len(offsets) == 800
    base = {"group": group, "topics": (topic,), "batch_records": 20, **FAST_GROUP}
    revoked_a: list[list[tuple[str, int]]] = []
    a = IngestConsumer(
        settings,
        IngestSettings(**base, worker_id="a", commit_interval_s=0.2, queue_records=a_queue),
        RawDecoder(),
        on_revoked=revoked_a.append,
    )
    b = IngestConsumer(settings, IngestSettings(**base, worker_id="b"), RawDecoder())
    trained: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}

    def train(name, consumer, batch):
        trained[name].extend(
            zip(batch.records.partitions.tolist(), batch.records.offsets.tolist(), strict=True)
        )
        batch.ack()

    with a:
        # A trains part of every partition alone, then stops training with a full queue.
        deadline = time.monotonic() + DEADLINE_S
        while len(trained["a"]) < 200 and time.monotonic() < deadline:
            batch = a.next_batch(timeout_s=0.5)
            if batch is not None:
                train("a", a, batch)
        assert len(trained["a"]) >= 200
        time.sleep(0.5)  # a periodic commit of everything acknowledged
        with b:
            assert b.assigned_event.wait(DEADLINE_S)
            deadline = time.monotonic() + DEADLINE_S
            while not (revoked_a and a.assignment() and b.assignment()):
                assert time.monotonic() < deadline, "rebalance did not finish"
                time.sleep(0.1)
            committed_at_revoke = {p: o for (_, p), o in a.last_committed.items()}
            mine_a = {p for _, p in a.assignment()}
            mine_b = {p for _, p in b.assignment()}
            assert mine_a and mine_b
            assert mine_a.isdisjoint(mine_b) and mine_a | mine_b == set(range(partitions))
            a_before = len(trained["a"])
            everything = set(offsets.values())
            deadline = time.monotonic() + DEADLINE_S
            while set(trained["a"]) | set(trained["b"]) != everything:
                assert time.monotonic() < deadline, "not every record was trained"
                for name, consumer in (("a", a), ("b", b)):
                    batch = consumer.next_batch(timeout_s=0.1)
                    if batch is not None:
                        train(name, consumer, batch)
    # After the rebalance A handed out only its own partitions: the revoked ones' queued
    # records were dropped, not trained.
    assert {p for p, _ in trained["a"][a_before:]} <= mine_a
    # B resumed every partition it took over exactly at what A had committed.
    taken_over = 0
    for p in mine_b:
        start = committed_at_revoke.get(p, 0)
        b_offsets = [o for q, o in trained["b"] if q == p]
        if start < 100:
            taken_over += 1
            assert min(b_offsets) == start
        else:
            assert b_offsets == []
    assert taken_over  # B did take over unfinished partitions
    assert committed_on_broker(settings, group, topic, range(partitions)) == {
        p: 100 for p in range(partitions)
    }


POISON_CASES = {
    "json": (
        JsonDecoder([Field("id", np.int64)]),
        lambda i: json.dumps({"id": i}).encode(),
        [b"{not json", b'{"id": "x"}'],
    ),
    "protobuf": (
        ProtobufDecoder(pb.ThroughputSample, [Field("workers", np.uint32)]),
        lambda i: pb.ThroughputSample(workers=i).SerializeToString(),
        [b"\x0a\x05ab", b"\xff\xff\xff"],
    ),
}


@pytest.mark.parametrize("case", sorted(POISON_CASES))
def test_poison_records_land_in_the_dlq_with_their_origin_and_the_rest_trains(broker, case):
    decoder, encode_good, bad_values = POISON_CASES[case]
    settings = broker.kafka_settings()
    topic, group = unique(f"ingest-poison-{case}"), unique("group")
    create_topic(settings, topic, 1)
    records = [(0, encode_good(i)) for i in range(30)]
    records.insert(5, (0, bad_values[0]))
    records.insert(12, (0, b"{" + b" " * 5000 + b"}"))  # oversized
    records.insert(20, (0, bad_values[1]))
    offsets = produce(settings, topic, records)
    bad = {offsets[records[i][1]][1] for i in (5, 12, 20)}
    ingest = IngestSettings(
        group=group, topics=(topic,), partitions=(0,), max_record_bytes=1000, batch_records=8
    )
    with IngestConsumer(settings, ingest, decoder) as consumer:
        batches = drain(consumer, 30)
        assert consumer.dead_letters is not None
        deadline = time.monotonic() + DEADLINE_S
        while consumer.dead_letters.delivered < 3 and time.monotonic() < deadline:
            consumer.dead_letters.poll(0.1)
        snapshot = consumer.metrics.snapshot()
    trained = sorted(o for b in batches for o in b.records.offsets.tolist())
    assert len(trained) == 30 and not set(trained) & bad
    assert snapshot.dead_letters == 3
    assert committed_on_broker(settings, group, topic, [0]) == {0: 33}  # nothing blocks

    reader = Consumer(
        settings.confluent_config(**{"group.id": unique("dlq"), "auto.offset.reset": "earliest"})
    )
    reader.assign([TopicPartition(f"{topic}.dlq", 0, 0)])
    letters: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(letters) < 3 and time.monotonic() < deadline:
            letters += [m for m in reader.consume(10, 0.5) if m.error() is None]
    finally:
        reader.close()
    assert len(letters) == 3
    origins = []
    for letter in letters:
        headers: dict[str, Any] = dict(letter.headers() or [])
        assert headers["streamtrain.origin.topic"] == topic.encode()
        assert headers["streamtrain.origin.partition"] == b"0"
        assert headers["streamtrain.error"]
        origins.append(int(headers["streamtrain.origin.offset"]))
    assert set(origins) == bad
    oversized = next(m for m in letters if b"limit" in dict(m.headers())["streamtrain.error"])
    assert len(oversized.value()) == 5002  # the original payload, untouched


def test_worker_publishes_throughput_samples(broker):
    settings = broker.kafka_settings()
    topic, group = unique("ingest-samples"), unique("job")
    samples_topic = unique("samples")
    create_topic(settings, topic, 2)
    create_topic(settings, samples_topic, 1)
    produce(settings, topic, [(i % 2, b"x" * 16) for i in range(400)])

    class App:
        decoder = RawDecoder()

        def step(self, batch):
            time.sleep(0.05)  # a training step that takes time, so samples see a rate

    ingest = IngestSettings(
        group=group, topics=(topic,), partitions=(0, 1), batch_records=50, worker_id="w-1"
    )
    run = WorkerRun(
        max_records=400, throughput_topic=samples_topic, sample_interval_s=0.1, pool_size=3
    )
    summary = run_worker(settings, ingest, App(), run)
    assert summary.records_trained == 400
    assert summary.steps == 8
    assert summary.committed == {(topic, 0): 200, (topic, 1): 200}
    memory = summary.to_json()["memory"]  # RSS against the local queue's bytes
    assert memory["queue_peak_mib"] > 0
    assert memory["rss_bound_mib"] == pytest.approx(2 * memory["queue_peak_mib"] + 32, abs=0.2)
    assert memory["within_bound"] is (memory["rss_growth_mib"] <= memory["rss_bound_mib"])

    reader = Consumer(settings.confluent_config(**{"group.id": unique("samples-reader")}))
    reader.assign([TopicPartition(samples_topic, 0, 0)])
    samples: list[pb.ThroughputSample] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            messages = [m for m in reader.consume(100, 0.5) if m.error() is None]
            if not messages and samples:
                break
            samples += [decode(pb.ThroughputSample, m.value() or b"") for m in messages]
    finally:
        reader.close()
    assert len(samples) >= 2
    assert {(s.job, s.worker_id, s.workers) for s in samples} == {(group, "w-1", 3)}
    assert any(s.records_per_s_trained > 0 for s in samples)
    assert sum(s.records_per_s_trained * s.window_s for s in samples) == pytest.approx(
        400, rel=0.01
    )
    last = samples[-1]
    assert {(p.partition, p.offset) for p in last.positions} <= {(0, 200), (1, 200)}


def test_prometheus_endpoint_on_loopback():
    metrics = WorkerMetrics()
    metrics.add(consumed=12, trained=10)
    server, thread = serve_metrics(metrics, "w-9", 0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert 'streamtrain_worker_records_trained_total{worker="w-9"} 10.0' in text
