"""Membership through the compacted ``<job>.members`` topic on the embedded broker."""

import threading
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from streamtrain import wire
from streamtrain.proto.data_plane_pb2 import Member
from streamtrain.shuffle.kafka_membership import KafkaMembership, members_topic
from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.testing import RecordingAcknowledger, records
from tests.integration import waiting


def wait_for(predicate, timeout_s=20.0, what="condition"):
    waiting.wait_for(predicate, timeout_s, what, interval_s=0.05)


def _me(worker, incarnation=1, key=None):
    return PeerInfo(
        worker, f"tcp://127.0.0.1:1{incarnation}", "tcp://127.0.0.1:2", incarnation, key
    )


def _membership(broker, job, **kw):
    return KafkaMembership(
        broker.kafka_settings(),
        job,
        heartbeat_interval_ms=kw.pop("interval", 200),
        heartbeat_timeout_ms=kw.pop("timeout", 1_500),
    )


def _write(broker, job, worker, heartbeat_at_ms, value=True):
    producer = Producer(broker.kafka_settings().confluent_config())
    record = Member(
        job=job,
        worker_id=worker,
        data_endpoint="tcp://127.0.0.1:5",
        event_endpoint="tcp://127.0.0.1:6",
        incarnation=7,
        heartbeat_at_ms=heartbeat_at_ms,
        heartbeat_interval_ms=200,
    )
    producer.produce(
        members_topic(job), key=worker.encode(), value=wire.encode(record) if value else None
    )
    assert producer.flush(10) == 0


def test_workers_find_each_other_and_a_clean_exit_removes_at_once(broker):
    job = f"job-{uuid.uuid4().hex[:8]}"
    a, b = _membership(broker, job), _membership(broker, job, timeout=30_000)
    a.start(_me("a", key=b"k" * 40))
    b.start(_me("b"))
    try:
        wait_for(lambda: set(a.peers()) == {"b"} and set(b.peers()) == {"a"}, what="discovery")
        assert b.peers()["a"].curve_public_key == b"k" * 40
        assert b.peers()["a"].data_endpoint == "tcp://127.0.0.1:11"
        assert not b.peers()["a"].legacy  # it announced the batch form it reads
        # an older release's announcement has no batch schema version: it reads version 1
        _write(broker, job, "old", time.time_ns() // 1_000_000)
        wait_for(lambda: "old" in b.peers(), what="the older worker")
        assert b.peers()["old"].batch_schema_version == 1
        a.close()
        # b's timeout is 30 s: only the tombstone can explain a quick removal
        wait_for(lambda: "a" not in b.peers(), timeout_s=10, what="tombstone")
        assert b.stats().tombstones_read >= 1
    finally:
        a.close()
        b.close()


def test_a_silent_peer_expires_and_stale_history_is_not_revived(broker):
    job = f"job-{uuid.uuid4().hex[:8]}"
    now_ms = time.time_ns() // 1_000_000
    _write(broker, job, "long-dead", now_ms - 600_000)  # killed -9 long ago, no tombstone
    watcher = _membership(broker, job)
    watcher.start(_me("watcher"))
    try:
        wait_for(lambda: watcher.stats().records_read >= 2, what="history read")
        assert "long-dead" not in watcher.peers()
        _write(broker, job, "ghost", time.time_ns() // 1_000_000)  # one heartbeat, then silence
        wait_for(lambda: "ghost" in watcher.peers(), what="ghost seen")
        seen_at = time.monotonic()
        wait_for(lambda: "ghost" not in watcher.peers(), what="ghost expired")
        assert time.monotonic() - seen_at < 10
        assert watcher.stats().expired_peers >= 1
    finally:
        watcher.close()


def test_malformed_member_records_are_counted(broker):
    job = f"job-{uuid.uuid4().hex[:8]}"
    watcher = _membership(broker, job)
    watcher.start(_me("watcher"))
    try:
        producer = Producer(broker.kafka_settings().confluent_config())
        producer.produce(members_topic(job), key=b"junk", value=b"\xff\xff\xff")
        producer.produce(members_topic(job), key=None, value=b"x")
        record = Member(
            job="other-job",
            worker_id="x",
            data_endpoint="tcp://127.0.0.1:1",
            event_endpoint="tcp://127.0.0.1:2",
            heartbeat_at_ms=time.time_ns() // 10**6,
        )
        producer.produce(members_topic(job), key=b"x", value=wire.encode(record))
        assert producer.flush(10) == 0
        wait_for(lambda: watcher.stats().malformed_records >= 3, what="malformed counted")
        assert watcher.peers() == {}
    finally:
        watcher.close()


def test_unusable_announcements_are_dropped_and_the_shuffle_keeps_working(broker):
    """One record announcing ``tcp://nohost``, a 9-byte key or
    ``tcp://*:5555`` made ``connect()`` raise on every worker's forwarding thread, whose
    socket was left unowned, so closing hung and no batch ever timed out; a record with
    a far-future heartbeat or a huge interval stayed "live" for as long as it liked."""
    job = f"job-{uuid.uuid4().hex[:8]}"
    now_ms = time.time_ns() // 1_000_000
    bad: dict[str, dict[str, Any]] = {
        "no-port": {"data_endpoint": "tcp://nohost"},
        "wildcard": {"data_endpoint": "tcp://*:5555", "event_endpoint": "tcp://*:5556"},
        "short-key": {"curve_public_key": "123456789"},
        "from-the-future": {"heartbeat_at_ms": now_ms + 3_600_000},
        "forever": {"heartbeat_interval_ms": 30 * 86_400_000},
    }
    producer = Producer(broker.kafka_settings().confluent_config())
    for worker, fields in bad.items():
        record = Member(
            job=job,
            worker_id=worker,
            data_endpoint="tcp://127.0.0.1:5",
            event_endpoint="tcp://127.0.0.1:6",
            incarnation=1,
            heartbeat_at_ms=now_ms,
            heartbeat_interval_ms=200,
        )
        for name, value in fields.items():
            setattr(record, name, value)
        producer.produce(members_topic(job), key=worker.encode(), value=wire.encode(record))
    assert producer.flush(10) == 0

    settings: dict[str, Any] = {
        "queue_capacity_records": 100,
        "low_watermark_records": 20,
        "high_watermark_records": 80,
        "batch_records": 50,
        "credit_window_records": 200,
        "state_rebroadcast_ms": 200,
    }
    memberships = {w: _membership(broker, job, timeout=3_000) for w in ("origin", "receiver")}
    acks = RecordingAcknowledger()
    origin = ShuffleNode(
        ShuffleSettings(job=job, worker_id="origin", **settings), acks, memberships["origin"]
    )
    receiver = ShuffleNode(
        ShuffleSettings(job=job, worker_id="receiver", **settings),
        RecordingAcknowledger(),
        memberships["receiver"],
    )
    trained: list[int] = []
    with origin, receiver:
        wait_for(lambda: origin.forwarding.known_peers() == ["receiver"], what="the real peer")
        wait_for(lambda: memberships["origin"].stats().invalid_records >= len(bad), what="drops")
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        assert origin.put(records(0, 400), timeout_s=10) is None
        deadline = time.monotonic() + 30
        while acks.acked_records("t", 0) < 300 and time.monotonic() < deadline:
            batch = receiver.take(100, timeout_s=0.05)
            if batch is not None:
                trained.extend(batch.columns.offsets.tolist())
                receiver.ack(batch)
        assert set(memberships["origin"].peers()) == {"receiver"}
        assert origin.forwarding.failure is None and receiver.forwarding.failure is None
    # closing never waits on a forgotten socket: both forwarding threads are gone
    alive = [t.name for t in threading.enumerate() if t.name.startswith("forwarding-")]
    assert alive == []
    assert sorted(trained) == list(range(100, 400))
    assert acks.covered("t", 0) == [(100, 399)]
