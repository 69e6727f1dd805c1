"""The shuffle's doors: CURVE on the sockets (members talk,
everybody else is refused and counted), routing ids nobody can take over, bounded
frames, state events only from their own worker, batches only of the job's topics."""

import contextlib
import time
from typing import Any

import zmq

from streamtrain.proto.data_plane_pb2 import BatchAck, WorkerStateEvent
from streamtrain.shuffle import codec
from streamtrain.shuffle.frames import routing_id
from streamtrain.shuffle.membership import MemberDirectory, PeerInfo, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import CurveKeys, ShuffleSettings
from streamtrain.testing import RecordingAcknowledger, records
from tests.integration.waiting import wait_for

SMALL: dict[str, Any] = {
    "queue_capacity_records": 100,
    "low_watermark_records": 20,
    "high_watermark_records": 80,
    "batch_records": 50,
    "credit_window_records": 200,
    "ack_timeout_ms": 3_000,
    "state_rebroadcast_ms": 200,
}


def _node(directory, worker, acks=None, *, curve=True, **overrides):
    settings = ShuffleSettings(
        job="job-s",
        worker_id=worker,
        curve=CurveKeys.generate() if curve else None,
        **(SMALL | overrides),
    )
    return ShuffleNode(settings, acks or RecordingAcknowledger(), StaticMembership(directory))


def _drain(node, seen, until):
    deadline = time.monotonic() + 15
    while not until() and time.monotonic() < deadline:
        batch = node.take(100, timeout_s=0.05)
        if batch is not None:
            seen.extend(batch.columns.offsets.tolist())
            node.ack(batch)


def _dealer(context, worker, endpoint, keys=None, server_key=None, nonce=b"nonce"):
    socket = context.socket(zmq.DEALER)
    socket.linger = 0
    socket.routing_id = routing_id(worker, nonce)
    if keys is not None:
        socket.curve_secretkey = keys.secret_key
        socket.curve_publickey = keys.public_key
        socket.curve_serverkey = server_key
    socket.connect(endpoint)
    return socket


def test_members_forward_over_curve():
    directory = MemberDirectory()
    origin_acks = RecordingAcknowledger()
    origin = _node(directory, "origin", origin_acks)
    receiver = _node(directory, "receiver")
    seen: list[int] = []
    with origin, receiver:
        assert origin.me.curve_public_key is not None
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        assert origin.put(records(0, 600), timeout_s=10) is None
        _drain(receiver, seen, lambda: origin_acks.acked_records("t", 0) == 500)
    assert origin_acks.covered("t", 0) == [(100, 599)]
    assert sorted(seen) == list(range(100, 600))
    assert receiver.stats().forwarding.zap_refused == 0


def test_unauthenticated_peers_are_refused_and_counted():
    directory = MemberDirectory()
    member_keys = CurveKeys.generate()
    directory.announce(
        PeerInfo("member", "tcp://127.0.0.1:9", "tcp://127.0.0.1:9", 1, member_keys.public_key)
    )
    receiver = _node(directory, "receiver")
    seen: list[int] = []
    with zmq.Context() as context, receiver:
        endpoint, server_key = receiver.me.data_endpoint, receiver.me.curve_public_key
        frame = codec.encode_batch(
            records(0, 5), job="job-s", batch_id="b", origin_worker="member", sent_at_ms=0
        )
        stranger = _dealer(context, "member", endpoint, CurveKeys.generate(), server_key)
        plain = _dealer(context, "member", endpoint)  # no CURVE at all
        impersonator = _dealer(context, "receiver", endpoint, member_keys, server_key)
        try:
            wait_for(lambda: receiver.forwarding.known_peers() == ["member"], what="membership")
            for socket in (stranger, plain):
                # NOBLOCK: once its handshake was refused a DEALER may have no pipe left,
                # and a blocking send would then wait forever (it hung a CI run)
                with contextlib.suppress(zmq.Again):
                    socket.send_multipart([codec.KIND_BATCH, frame], flags=zmq.NOBLOCK)
            wait_for(
                lambda: (
                    receiver.stats().forwarding.zap_refused >= 1
                    and receiver.stats().forwarding.handshakes_failed >= 2
                ),
                what="refused handshakes counted",
            )
            # a member's key with another member's routing id: authenticated, but dropped
            impersonator.send_multipart([codec.KIND_BATCH, frame])
            wait_for(
                lambda: receiver.stats().forwarding.impostor_frames_dropped >= 1,
                what="impersonation dropped",
            )
            assert receiver.take(100, timeout_s=0.5) is None
            # the genuine member gets through
            member = _dealer(context, "member", endpoint, member_keys, server_key)
            try:
                member.send_multipart([codec.KIND_BATCH, frame])
                _drain(receiver, seen, lambda: len(seen) == 5)
            finally:
                member.close()
        finally:
            for socket in (stranger, plain, impersonator):
                socket.close()
    stats = receiver.stats().forwarding
    assert sorted(seen) == [0, 1, 2, 3, 4]
    assert stats.batches_received == 1
    assert receiver.forwarding.failure is None


def _member(directory, worker="known"):
    """Announce ``worker`` as a member whose endpoints nobody serves (its batches are sent
    by hand)."""
    directory.announce(PeerInfo(worker, "tcp://127.0.0.1:9", "tcp://127.0.0.1:9", 1))


def _batch(origin="known", batch_id="b1", n=5, topic="t", payload=None):
    return codec.encode_batch(
        records(0, n, topic=topic, payload=payload),
        job="job-s",
        batch_id=batch_id,
        origin_worker=origin,
        sent_at_ms=0,
    )


def _answers(socket, until_status, timeout_ms=10_000):
    """The (batch id, status, reason) answers ``socket`` receives until ``until_status``."""
    got = []
    while socket.poll(timeout_ms):
        kind, payload = socket.recv_multipart()
        answer = codec.decode_control(kind, payload)
        assert isinstance(answer, BatchAck)
        got.append((answer.batch_id, answer.status, answer.reason))
        if answer.status == until_status:
            break
    return got


def test_nobody_can_take_over_a_connected_members_routing_id():
    """``router_handover=1`` let a second connection under a member's
    routing id take it over, and with it the member's ACKs and credit."""
    directory = MemberDirectory()
    _member(directory)
    receiver = _node(directory, "receiver", curve=False)
    with zmq.Context() as context, receiver:
        endpoint = receiver.me.data_endpoint
        wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
        owner = _dealer(context, "known", endpoint, nonce=b"secret")
        thief = _dealer(context, "known", endpoint, nonce=b"secret")  # the same routing id
        monitor = thief.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        try:
            owner.send_multipart([codec.KIND_BATCH, _batch()])
            assert _answers(owner, BatchAck.RECEIVED) == [("b1", BatchAck.RECEIVED, "")]
            assert monitor.poll(10_000), "the second connection never got through its handshake"
            batch = receiver.take(100, timeout_s=5)
            assert batch is not None
            receiver.ack(batch)
            assert _answers(owner, BatchAck.ACKED) == [("b1", BatchAck.ACKED, "")]
            assert not thief.poll(500)
        finally:
            for socket in (owner, thief, monitor):
                socket.close()


def test_frames_beyond_the_bound_are_refused_and_batches_are_cut_to_fit():
    """No ``MAXMSGSIZE`` bounded a frame, so any member could make a
    receiver buffer a frame of any size."""
    directory = MemberDirectory()
    _member(directory)
    bound = 64 * 1024
    receiver = _node(directory, "receiver", curve=False, max_frame_bytes=bound)
    with zmq.Context() as context, receiver:
        endpoint = receiver.me.data_endpoint
        wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
        member = _dealer(context, "known", endpoint)
        try:
            member.send_multipart(
                [codec.KIND_BATCH, _batch("known", "big", n=4, payload=bound * b"x")]
            )
            answers = []
            for attempt in range(50):  # what followed the big frame went down with it
                member.send_multipart([codec.KIND_BATCH, _batch("known", f"small-{attempt}", n=3)])
                if member.poll(500):
                    answers = _answers(member, BatchAck.RECEIVED)
                    break
        finally:
            member.close()
        # libzmq cut the connection on the big frame; the member reconnected for the rest
        assert answers and answers[-1][1] == BatchAck.RECEIVED
        assert all(batch_id.startswith("small") for batch_id, _, _ in answers)
        received = receiver.stats().forwarding.records_received
        assert received >= 3 and received % 3 == 0  # small batches only (the big one had 4)


def test_a_sender_cuts_batches_to_the_frame_bound_and_keeps_what_cannot_fit():
    directory = MemberDirectory()
    origin_acks = RecordingAcknowledger()
    bound = 64 * 1024
    overrides = {"curve": False, "max_frame_bytes": bound}
    origin = _node(directory, "origin", origin_acks, **overrides)
    receiver = _node(directory, "receiver", **overrides)
    seen: list[int] = []
    with origin, receiver:
        wait_for(lambda: origin.stats().forwarding.events_received > 0, what="receiver state")
        big = records(0, 100, payload=10_000 * b"y")  # 100 queued here; the rest overflows
        huge = records(100, 1, payload=(bound + 1) * b"z")  # fits no frame at all
        rest = records(101, 200, payload=10_000 * b"y")
        for chunk in (big, huge, rest):
            assert origin.put(chunk, timeout_s=10) is None
        _drain(receiver, seen, lambda: origin_acks.acked_records("t", 0) == 200)
        stats = origin.stats()
    assert sorted(seen) == list(range(101, 301))
    assert stats.unit.oversized_records_kept == 1  # record 100 is trained by the origin
    assert stats.forwarding.batches_sent >= 200 // 6  # at most 6 such records per frame
    assert receiver.stats().forwarding.malformed_frames_dropped == 0


def test_only_a_worker_itself_can_say_it_left():
    """One SUB socket read every peer's events, so any member could
    publish ``LEFT`` (or a receiver state) in another worker's name."""
    directory = MemberDirectory()
    with zmq.Context() as context:
        forger = context.socket(zmq.PUB)
        forger.linger = 0
        port = forger.bind_to_random_port("tcp://127.0.0.1")
        directory.announce(PeerInfo("forger", "tcp://127.0.0.1:9", f"tcp://127.0.0.1:{port}", 1))
        origin_acks = RecordingAcknowledger()
        origin = _node(directory, "origin", origin_acks, curve=False)
        receiver = _node(directory, "receiver", curve=False)
        seen: list[int] = []
        forged = codec.encode_state(
            job="job-s",
            worker_id="receiver",
            state=WorkerStateEvent.LEFT,
            sequence=10**6,
            queue_records=0,
            at_ms=0,
        )
        try:
            with origin, receiver:

                def forged_and_dropped():
                    forger.send_multipart([codec.KIND_STATE, forged])
                    return origin.stats().forwarding.impostor_frames_dropped >= 3

                wait_for(forged_and_dropped, what="forged LEFT dropped")
                assert origin.put(records(0, 300), timeout_s=10) is None
                _drain(receiver, seen, lambda: origin_acks.acked_records("t", 0) == 200)
                stats = origin.stats().forwarding
        finally:
            forger.close()
    assert stats.batches_rerouted_on_leave == 0
    assert sorted(seen) == list(range(100, 300))


def test_a_batch_of_a_topic_the_job_does_not_read_is_refused():
    """A peer's batch could name any topic, and its undecodable records
    made the receiver create and write ``<topic>.dlq``."""
    directory = MemberDirectory()
    _member(directory)
    receiver = _node(directory, "receiver", curve=False, topics=("t",))
    with zmq.Context() as context, receiver:
        wait_for(lambda: receiver.forwarding.known_peers() == ["known"], what="membership")
        member = _dealer(context, "known", receiver.me.data_endpoint)
        try:
            member.send_multipart([codec.KIND_BATCH, _batch(topic="payroll")])
            answers = _answers(member, BatchAck.REJECTED)
        finally:
            member.close()
        assert answers == [("b1", BatchAck.REJECTED, "topic 'payroll' is not read by this job")]
        assert receiver.take(10, timeout_s=0.2) is None
        assert receiver.stats().forwarding.foreign_topic_batches_refused == 1
