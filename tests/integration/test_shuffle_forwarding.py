"""Two and three in-process workers over real ZeroMQ sockets on 127.0.0.1 (no broker).

Forwarding with ACKs and credit, re-routing on rejection, policies, and frames that must
be dropped and counted without hurting the worker.
"""

import threading
import time
from typing import Any

import pytest
import zmq

from streamtrain import wire
from streamtrain.errors import KafkaError, StreamtrainError
from streamtrain.ingest.tracker import OffsetTracker
from streamtrain.proto.data_plane_pb2 import BatchAck, WorkerStateEvent
from streamtrain.shuffle import codec
from streamtrain.shuffle.frames import routing_id
from streamtrain.shuffle.membership import MemberDirectory, PeerInfo, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.testing import RecordingAcknowledger, records
from streamtrain.worker.shuffle_queue import ShuffleQueue
from tests.integration.waiting import wait_for

SMALL: dict[str, Any] = {
    "queue_capacity_records": 100,
    "low_watermark_records": 20,
    "high_watermark_records": 80,
    "overflow_capacity_records": 10_000,
    "batch_records": 50,
    "credit_window_records": 200,
    "ack_timeout_ms": 3_000,
    "state_rebroadcast_ms": 200,
}


class Trainer:
    """Takes and acknowledges everything a node hands out, on its own thread."""

    def __init__(self, node, batch_records=40):
        self.node = node
        self.batch_records = batch_records
        self.seen = []
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            if self.paused.is_set():
                self._stop.wait(0.01)
                continue
            batch = self.node.take(self.batch_records, timeout_s=0.05)
            if batch is not None:
                self.seen.extend(
                    zip(
                        batch.columns.partitions.tolist(),
                        batch.columns.offsets.tolist(),
                        strict=True,
                    )
                )
                self.node.ack(batch)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive()


@pytest.fixture
def directory():
    return MemberDirectory()


def _node(directory, worker, acks=None, **overrides):
    settings = ShuffleSettings(job="job-f", worker_id=worker, **(SMALL | overrides))
    return ShuffleNode(
        settings, acks or RecordingAcknowledger(), StaticMembership(directory), seed=1
    )


def test_overflow_is_forwarded_acked_and_committed_at_the_origin(directory):
    origin_acks = RecordingAcknowledger()
    origin = _node(directory, "origin", origin_acks)
    receiver = _node(directory, "receiver")
    total = 2_000
    with origin, receiver, Trainer(receiver) as trained:
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        assert origin.put(records(0, total), timeout_s=10) is None
        # the origin's own trainer is idle: only forwarding can drain its overflow
        wait_for(lambda: origin_acks.acked_records("t", 0) == total - 100, what="forwarded acks")
        stats = origin.stats()
        receiver_stats = receiver.stats()
    assert origin_acks.position("t", 0) == 0  # its own first 100 records are still queued
    assert origin_acks.covered("t", 0) == [(100, total - 1)]
    assert sorted(trained.seen) == [(0, i) for i in range(100, total)]
    assert stats.forwarding.records_acked == total - 100
    assert stats.forwarding.in_flight_batches == 0
    assert receiver_stats.forwarding.records_received == total - 100
    assert receiver_stats.unit.records_trained == total - 100
    assert receiver_stats.forwarding.credit_violations == 0
    assert stats.forwarding.ack_rtt_p99_ms > 0


def test_a_busy_receiver_rejects_and_the_batch_goes_elsewhere(directory):
    origin_acks = RecordingAcknowledger()
    origin = _node(directory, "origin", origin_acks)
    busy = _node(directory, "busy")
    idle = _node(directory, "idle")
    with origin, busy, idle, Trainer(idle) as idle_trainer, Trainer(busy) as busy_trainer:
        wait_for(lambda: origin.stats().forwarding.events_received >= 2, what="states")
        busy_trainer.paused.set()
        assert origin.put(records(0, 1_100), timeout_s=10) is None

        def all_but_the_busy_ones():
            held = busy.stats().forwarding.records_received
            return origin_acks.acked_records("t", 0) == 1_000 - held

        wait_for(all_but_the_busy_ones, what="everything the busy receiver did not take")
        # what the busy receiver queued waits for its trainer (it is alive: no timeout)
        assert origin.stats().forwarding.batches_timed_out == 0
        busy_trainer.paused.clear()
        wait_for(lambda: origin_acks.acked_records("t", 0) == 1_000, what="all forwarded")
        stats = origin.stats().forwarding
    # the paused receiver took no more than its credit allowed; the idle one took the rest
    assert stats.records_acked == 1_000
    assert busy.stats().forwarding.records_received <= SMALL["credit_window_records"]
    assert len(idle_trainer.seen) >= 1_000 - SMALL["credit_window_records"]
    assert {o for _, o in idle_trainer.seen} | {o for _, o in busy_trainer.seen} >= set(
        range(100, 1_100)
    )


def test_policy_none_forwards_nothing_and_basic_spreads_evenly(directory):
    acks = {w: RecordingAcknowledger() for w in ("a", "b", "c")}
    nodes = {w: _node(directory, w, acks[w], policy=ShufflePolicy.BASIC) for w in acks}
    with (
        nodes["a"],
        nodes["b"],
        nodes["c"],
        Trainer(nodes["a"]) as ta,
        Trainer(nodes["b"]) as tb,
        Trainer(nodes["c"]) as tc,
    ):
        wait_for(lambda: nodes["a"].stats().forwarding.events_received >= 2, what="states")
        wait_for(lambda: nodes["a"].forwarding.known_peers() == ["b", "c"], what="peers")
        assert nodes["a"].put(records(0, 3_000), timeout_s=10) is None
        wait_for(lambda: acks["a"].acked_records("t", 0) == 3_000, what="all acked")
    counts = sorted(len(t.seen) for t in (ta, tb, tc))
    assert sum(counts) == 3_000
    assert counts[0] > 600  # every worker got a share although none asked for it

    directory2 = MemberDirectory()
    quiet = _node(directory2, "q", policy=ShufflePolicy.NONE)
    other = _node(directory2, "o")
    with quiet, other, Trainer(other) as to:
        wait_for(lambda: quiet.stats().forwarding.events_received > 0, what="states")
        assert quiet.put(records(0, 300), timeout_s=0.3) is not None  # pushes back instead
        time.sleep(0.3)
        assert quiet.stats().forwarding.batches_sent == 0
    assert to.seen == []


def _raw_dealer(context, worker, endpoint):
    socket = context.socket(zmq.DEALER)
    socket.linger = 0
    socket.routing_id = routing_id(worker, b"test-nonce")
    socket.connect(endpoint)
    return socket


@pytest.fixture
def impostor(directory):
    """A member "known" whose sockets the test drives by hand."""
    with zmq.Context() as context:
        router = context.socket(zmq.ROUTER)
        pub = context.socket(zmq.PUB)
        for socket in (router, pub):
            socket.linger = 0
        router_port = router.bind_to_random_port("tcp://127.0.0.1")
        pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
        directory.announce(
            PeerInfo("known", f"tcp://127.0.0.1:{router_port}", f"tcp://127.0.0.1:{pub_port}", 1)
        )
        try:
            yield context, pub
        finally:
            router.close()
            pub.close()


def _good(worker="known", batch_id="x", n=3):
    return codec.encode_batch(
        records(0, n), job="job-f", batch_id=batch_id, origin_worker=worker, sent_at_ms=0
    )


def _is_acked(kind, payload):
    if kind != codec.KIND_ACK:
        return False
    answer = codec.decode_control(kind, payload)
    return isinstance(answer, BatchAck) and answer.status == BatchAck.ACKED


def test_malformed_and_unknown_peer_frames_are_dropped_and_counted(directory, impostor):
    context, pub = impostor
    receiver = _node(directory, "receiver")
    with receiver, Trainer(receiver) as trained:
        endpoint = receiver.me.data_endpoint
        known = _raw_dealer(context, "known", endpoint)
        stranger = _raw_dealer(context, "stranger", endpoint)
        try:
            wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
            known.send_multipart([codec.KIND_BATCH, b"\xff\xfe garbage"])
            known.send_multipart([b"?", b"x"])
            known.send_multipart([codec.KIND_BATCH])
            known.send_multipart([codec.KIND_BATCH, _good(worker="receiver")])  # spoofed origin
            stranger.send_multipart([codec.KIND_BATCH, _good()])
            wait_for(
                lambda: (
                    receiver.stats().forwarding.malformed_frames_dropped >= 3
                    and receiver.stats().forwarding.impostor_frames_dropped >= 1
                    and receiver.stats().forwarding.unknown_peer_frames_dropped >= 1
                ),
                what="data frames dropped and counted",
            )
            # A stranger's own batch is refused out loud, not silently: it may have learned
            # of us before we learned of it, and should retry soon rather than time out.
            stranger.send_multipart([codec.KIND_BATCH, _good(worker="stranger", batch_id="s1")])
            assert stranger.poll(5_000), "no answer to the stranger's batch"
            answer = codec.decode_control(*stranger.recv_multipart())
            assert isinstance(answer, BatchAck)
            assert (answer.batch_id, answer.status, answer.reason) == (
                "s1",
                BatchAck.REJECTED,
                "unknown peer",
            )
            assert not stranger.poll(300)  # the spoofed-origin frame got no answer
            # events: garbage, another worker's (on known's socket), and a foreign job's
            # are dropped and counted
            before = receiver.stats().forwarding
            stranger_event = WorkerStateEvent(
                job="job-f", worker_id="nobody", state=WorkerStateEvent.RECEIVING, sequence=9
            )
            foreign_event = WorkerStateEvent(
                job="other", worker_id="known", state=WorkerStateEvent.RECEIVING, sequence=9
            )

            def publish():
                pub.send_multipart([codec.KIND_STATE, b"\xff\xff"])
                pub.send_multipart([codec.KIND_STATE, wire.encode(stranger_event)])
                pub.send_multipart([codec.KIND_STATE, wire.encode(foreign_event)])
                after = receiver.stats().forwarding
                return (
                    after.malformed_frames_dropped > before.malformed_frames_dropped
                    and after.impostor_frames_dropped >= before.impostor_frames_dropped + 2
                )

            wait_for(publish, what="event frames dropped and counted")
            # the worker still works: a well-formed batch from the member is trained and ACKed
            known.send_multipart([codec.KIND_BATCH, _good()])
            wait_for(lambda: len(trained.seen) == 3, what="good batch trained")
            answers = []
            while known.poll(2_000):
                answers.append(known.recv_multipart())
                if any(_is_acked(kind, payload) for kind, payload in answers):
                    break
            acks = [codec.decode_control(k, p) for k, p in answers if k == codec.KIND_ACK]
            assert all(isinstance(a, BatchAck) for a in acks)
            statuses = [(a.batch_id, a.status) for a in acks if isinstance(a, BatchAck)]
            # RECEIVED goes out only if the batch was not trained within RECEIVED_DELAY_S
            assert statuses in (
                [("x", BatchAck.ACKED)],
                [("x", BatchAck.RECEIVED), ("x", BatchAck.ACKED)],
            )
        finally:
            known.close()
            stranger.close()
    assert receiver.stats().forwarding.batches_received == 1
    assert receiver.forwarding.failure is None


def test_a_worker_that_is_not_receiving_rejects_batches(directory, impostor):
    context, _ = impostor
    receiver = _node(directory, "receiver", policy=ShufflePolicy.NONE)
    with receiver:
        known = _raw_dealer(context, "known", receiver.me.data_endpoint)
        try:
            wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
            known.send_multipart([codec.KIND_BATCH, _good()])
            assert known.poll(5_000)
            kind, payload = known.recv_multipart()
        finally:
            known.close()
    ack = codec.decode_control(kind, payload)
    assert isinstance(ack, BatchAck)
    assert (ack.batch_id, ack.status, ack.reason) == ("x", BatchAck.REJECTED, "not receiving")
    assert receiver.stats().forwarding.batches_refused == 1


class _BrokenMembership:
    """A membership whose announcement fails, as an unreachable Kafka would."""

    def start(self, me):
        raise KafkaError("cannot announce: no broker")

    def peers(self):
        return {}

    def close(self):
        pass


def test_a_failed_announcement_stops_the_unit_and_frees_its_sockets():
    settings = ShuffleSettings(job="job-f", worker_id="lonely", **SMALL)
    node = ShuffleNode(settings, RecordingAcknowledger(), _BrokenMembership())
    threads_before = threading.active_count()
    with pytest.raises(KafkaError, match="no broker"):
        node.start()
    assert threading.active_count() == threads_before
    endpoint = node.me.data_endpoint
    with zmq.Context() as context, context.socket(zmq.ROUTER) as again:
        again.linger = 0
        again.bind(endpoint)  # the port was released


def test_the_origin_tracker_commits_only_past_records_acked_locally_or_remotely(directory):
    """With ingest's real OffsetTracker: forwarded records hold the commit back until ACKed."""
    tracker = OffsetTracker()
    tracker.assign("t", 0, -1)
    origin = _node(directory, "origin", tracker)
    roomy = {"queue_capacity_records": 1_000, "low_watermark_records": 500}
    receiver = _node(directory, "receiver", high_watermark_records=800, **roomy)
    with origin, receiver, Trainer(receiver) as remote:
        remote.paused.set()
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        tracker.handed_out("t", 0, 0, 299)
        assert origin.put(records(0, 300), timeout_s=10) is None
        wait_for(lambda: receiver.stats().forwarding.records_received == 200, what="forwarded")
        local = origin.take(100, timeout_s=5)
        assert local is not None and local.columns.offsets.tolist() == list(range(100))
        origin.ack(local)
        assert tracker.committable() == {("t", 0): 100}  # 100..299 sit untrained at the peer
        remote.paused.clear()
        wait_for(lambda: tracker.committable() == {("t", 0): 300}, what="remote ACKs")
    assert tracker.in_flight_records() == 0
    assert tracker.stale_acks == 0


class _MembershipThatBreaks:
    """A membership whose view raises an unexpected error once ``broken`` is set."""

    def __init__(self):
        self.broken = threading.Event()

    def start(self, me):
        pass

    def peers(self):
        if self.broken.is_set():
            raise RuntimeError("membership view corrupted")
        return {}

    def close(self):
        pass


def test_a_dead_forwarding_thread_fails_the_worker_loudly():
    """A forwarding thread that died must stop the worker with its
    error, not leave batches in flight that can never be answered."""
    settings = ShuffleSettings(job="job-f", worker_id="fragile", **SMALL)
    acks = RecordingAcknowledger()
    membership = _MembershipThatBreaks()
    node = ShuffleNode(settings, acks, membership)
    queue = ShuffleQueue(node, acks)
    with node:
        queue.put(records(0, 10))
        assert queue.get(10, timeout_s=5) is not None
        membership.broken.set()
        wait_for(lambda: node.forwarding.failure is not None, what="the failure recorded")
        with pytest.raises(StreamtrainError, match="membership view corrupted"):
            queue.get(10, timeout_s=5)
    alive = [t.name for t in threading.enumerate() if t.name == "forwarding-fragile"]
    assert alive == []  # its sockets were closed, its thread is gone
