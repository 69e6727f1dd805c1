"""Flow control and timeouts between real nodes over ZeroMQ on 127.0.0.1 (no broker):
credit that cannot leak, answers that cannot vanish, an ACK timeout that does not count
the receiver's queue and an immediate answer to a newer schema version."""

import threading
import time
from typing import Any

import pytest
import zmq

from streamtrain.proto.data_plane_pb2 import BatchAck, RecordBatch, WorkerStateEvent
from streamtrain.shuffle import codec
from streamtrain.shuffle.frames import routing_id
from streamtrain.shuffle.membership import MemberDirectory, PeerInfo, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.testing import RecordingAcknowledger, records
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


@pytest.fixture
def directory():
    return MemberDirectory()


def _node(directory, worker, acks=None, **overrides):
    settings = ShuffleSettings(job="job-c", worker_id=worker, **(SMALL | overrides))
    return ShuffleNode(
        settings, acks or RecordingAcknowledger(), StaticMembership(directory), seed=3
    )


class GrantlessReceiver:
    """A member that announces RECEIVING, takes every batch and ACKs it, and never sends
    a CreditGrant: as if every grant it sent had gone astray."""

    def __init__(self, context, directory, worker="grantless"):
        self.router = context.socket(zmq.ROUTER)
        self.pub = context.socket(zmq.PUB)
        for socket in (self.router, self.pub):
            socket.linger = 0
        router_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        pub_port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        directory.announce(
            PeerInfo(worker, f"tcp://127.0.0.1:{router_port}", f"tcp://127.0.0.1:{pub_port}", 1)
        )
        self.worker = worker
        self.offsets: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        sequence = 0
        next_state = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_state:
                sequence += 1
                state = codec.encode_state(
                    job="job-c",
                    worker_id=self.worker,
                    state=WorkerStateEvent.RECEIVING,
                    sequence=sequence,
                    queue_records=0,
                    at_ms=0,
                )
                self.pub.send_multipart([codec.KIND_STATE, state])
                next_state = time.monotonic() + 0.1
            if not self.router.poll(50):
                continue
            route, _, payload = self.router.recv_multipart()
            batch = codec.decode_batch(payload)
            self.offsets.extend(batch.columns.offsets.tolist())
            ack = codec.encode_ack(
                job="job-c",
                batch_id=batch.batch_id,
                receiver=self.worker,
                status=BatchAck.ACKED,
                reason="",
                at_ms=0,
            )
            self.router.send_multipart([route, codec.KIND_ACK, ack])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join(timeout=5)
        self.router.close()
        self.pub.close()


def test_credit_comes_back_with_the_acks_even_if_no_grant_ever_does(directory):
    """Credit came back only through grants, so lost grants drove a
    receiver's credit to 0 and it was never chosen again (here: after one window)."""
    acks = RecordingAcknowledger()
    origin = _node(directory, "origin", acks)
    total = 1_100  # 100 fit the origin's queue; 1,000 overflow: five credit windows
    with zmq.Context() as context, GrantlessReceiver(context, directory) as receiver, origin:
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        assert origin.put(records(0, total), timeout_s=10) is None
        wait_for(lambda: acks.acked_records("t", 0) == 1_000, what="every overflow record")
        stats = origin.stats().forwarding
    assert sorted(receiver.offsets) == list(range(100, total))
    assert stats.batches_timed_out == 0


def _dealer(context, endpoint, nonce=b"n1"):
    socket = context.socket(zmq.DEALER)
    socket.linger = 0
    socket.routing_id = routing_id("known", nonce)
    socket.connect(endpoint)
    return socket


def _answer(socket, timeout_ms=10_000):
    assert socket.poll(timeout_ms), "no answer"
    answer = codec.decode_control(*socket.recv_multipart())
    assert isinstance(answer, BatchAck)
    return answer.batch_id, answer.status, answer.reason


def _batch(batch_id="b1"):
    return codec.encode_batch(
        records(0, 5), job="job-c", batch_id=batch_id, origin_worker="known", sent_at_ms=0
    )


def test_an_answer_to_a_sender_that_is_away_is_counted_and_sent_when_it_is_back(directory):
    """Answers went through a ROUTER without ``ROUTER_MANDATORY``, so
    one to a momentarily unknown identity vanished and ``control_send_failures`` could
    never count it."""
    directory.announce(PeerInfo("known", "tcp://127.0.0.1:9", "tcp://127.0.0.1:9", 1))
    receiver = _node(directory, "receiver", ack_timeout_ms=30_000)
    with zmq.Context() as context, receiver:
        endpoint = receiver.me.data_endpoint
        wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
        sender = _dealer(context, endpoint)
        sender.send_multipart([codec.KIND_BATCH, _batch()])
        assert _answer(sender) == ("b1", BatchAck.RECEIVED, "")
        sender.close()  # the sender's connection drops (a reconnect blip)
        time.sleep(1.0)  # let the receiver's I/O thread see the connection go
        batch = receiver.take(100, timeout_s=5)
        assert batch is not None
        receiver.ack(batch)
        wait_for(
            lambda: receiver.stats().forwarding.control_send_failures >= 1,
            what="the failed answer counted",
        )
        back = _dealer(context, endpoint)  # the same routing id reconnects
        try:
            assert _answer(back) == ("b1", BatchAck.ACKED, "")
        finally:
            back.close()
    assert receiver.stats().forwarding.answers_lost == 0


def test_the_ack_timeout_does_not_count_the_wait_in_a_slow_receivers_queue(directory):
    """The ACK timeout counted the time a batch waited in the
    receiver's queue, so every batch forwarded to a trainer slower than the window per
    timeout timed out and was trained twice."""
    acks = RecordingAcknowledger()
    fast_timeout = {"ack_timeout_ms": 1_000}
    origin = _node(directory, "origin", acks, **fast_timeout)
    receiver = _node(directory, "receiver", **fast_timeout)
    seen: list[int] = []
    with origin, receiver:
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        assert origin.put(records(0, 700), timeout_s=10) is None
        deadline = time.monotonic() + 60
        while acks.acked_records("t", 0) < 600 and time.monotonic() < deadline:
            batch = receiver.take(25, timeout_s=0.05)
            if batch is None:
                continue
            time.sleep(0.25)  # 100 records/s: a window of 200 waits 2 s, twice the timeout
            seen.extend(batch.columns.offsets.tolist())
            receiver.ack(batch)
        stats = origin.stats().forwarding
    assert acks.covered("t", 0) == [(100, 699)]
    assert stats.batches_timed_out == 0
    assert sorted(seen) == list(range(100, 700))  # each trained once


def test_a_batch_of_a_newer_schema_version_is_answered_at_once(directory):
    """A frame with a newer ``schema_version`` was dropped without an
    answer, costing its sender a whole ACK timeout per batch during a rolling upgrade."""
    directory.announce(PeerInfo("known", "tcp://127.0.0.1:9", "tcp://127.0.0.1:9", 1))
    receiver = _node(directory, "receiver")
    newer = RecordBatch(
        schema_version=codec.BATCH_SCHEMA_VERSION + 1,
        job="job-c",
        batch_id="v2-1",
        origin_worker="known",
        topic="t",
        partitions=[0],
        offsets=[0],
        timestamps_ms=[0],
        payload_lengths=[1],
        payloads=b"x",
    ).SerializeToString()
    with zmq.Context() as context, receiver:
        wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
        sender = _dealer(context, receiver.me.data_endpoint)
        try:
            sender.send_multipart([codec.KIND_BATCH, newer])
            batch_id, status, reason = _answer(sender)
        finally:
            sender.close()
    assert (batch_id, status) == ("v2-1", BatchAck.REJECTED)
    assert "newer" in reason
    assert receiver.stats().forwarding.newer_schema_batches_refused == 1
