"""The ForwardingUnit's pure collaborators: in-flight bookkeeping, frame checks, the
mailbox, and the typed counters (no sockets, no threads)."""

import dataclasses
import select

from streamtrain import wire
from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant, RecordBatch, WorkerStateEvent
from streamtrain.shuffle import codec
from streamtrain.shuffle.frames import (
    BatchRefusal,
    Drop,
    check_batch,
    check_control,
    check_event,
    routing_id,
    sender_of,
)
from streamtrain.shuffle.inflight import InFlightBatches
from streamtrain.shuffle.mailbox import Mailbox
from streamtrain.shuffle.stats import COUNTER_NAMES, Counters, ForwardingCounters, ForwardingStats
from streamtrain.testing import records

# -- in flight ----------------------------------------------------------------------------


def test_batch_ids_are_unique_per_incarnation():
    flights = InFlightBatches(incarnation=255, ack_timeout_s=1.0)
    assert [flights.next_id(), flights.next_id()] == ["ff-1", "ff-2"]


def test_only_the_receiver_a_batch_went_to_answers_it():
    flights = InFlightBatches(1, ack_timeout_s=1.0)
    flights.sent("a", "r1", records(0, 3), now=0.0)
    assert flights.answered("a", "r2") is None  # a stray answer leaves it in flight
    assert len(flights) == 1
    flight = flights.answered("a", "r1")
    assert flight is not None and (flight.batch_id, flight.receiver) == ("a", "r1")
    assert len(flight.columns) == 3
    assert flights.answered("a", "r1") is None  # late: already settled
    assert len(flights) == 0


def test_batches_expire_oldest_first_after_the_ack_timeout():
    flights = InFlightBatches(1, ack_timeout_s=2.0)
    assert flights.next_deadline() is None
    flights.sent("a", "r1", records(0, 1), now=0.0)
    flights.sent("b", "r2", records(1, 1), now=1.0)
    flights.sent("c", "r1", records(2, 1), now=1.5)
    assert flights.next_deadline() == 2.0
    assert flights.expired(now=1.9) == []
    assert [f.batch_id for f in flights.expired(now=3.2)] == ["a", "b"]
    assert flights.next_deadline() == 3.5
    assert len(flights) == 1


def test_a_receiver_that_leaves_takes_back_its_batches_in_send_order():
    flights = InFlightBatches(1, ack_timeout_s=9.0)
    for batch_id, receiver in (("a", "r1"), ("b", "r2"), ("c", "r1")):
        flights.sent(batch_id, receiver, records(0, 1), now=0.0)
    assert [f.batch_id for f in flights.sent_to("r1")] == ["a", "c"]
    assert flights.sent_to("r1") == []
    assert len(flights) == 1


# -- frames -------------------------------------------------------------------------------


def _batch(origin="w1", job="j", batch_id="b-1"):
    return codec.encode_batch(
        records(0, 4), job=job, batch_id=batch_id, origin_worker=origin, sent_at_ms=0
    )


def test_a_members_own_batch_of_this_job_passes():
    batch = check_batch("w1", _batch(), members={"w1"}, job="j", curve=False)
    assert not isinstance(batch, Drop | BatchRefusal)
    assert (batch.batch_id, len(batch.columns), batch.columns.forwarded) == ("b-1", 4, True)
    curved = check_batch("w1", _batch(), members={"w1"}, job="j", curve=True, user_id="w1")
    assert not isinstance(curved, Drop)


def test_batches_are_dropped_for_a_reason():
    members = {"w1", "w2"}

    def check(sender, payload, **kw):
        return check_batch(sender, payload, members=members, job="j", **({"curve": False} | kw))

    assert check("w1", _batch(), curve=True, user_id="w2") is Drop.IMPOSTOR
    assert check("w1", _batch(), curve=True, user_id=None) is Drop.IMPOSTOR
    assert check("w1", b"\xff\xff") is Drop.MALFORMED
    assert check("w1", _batch(origin="w2")) is Drop.IMPOSTOR
    assert check("w1", _batch(job="other")) is Drop.IMPOSTOR
    assert check("w9", _batch("w8")) is Drop.NOT_A_MEMBER  # not its own batch: no answer


def test_only_a_non_members_own_well_formed_batch_is_answered():
    def check(sender, payload):
        return check_batch(sender, payload, members={"w1"}, job="j", curve=False)

    refusal = check("w9", _batch("w9", batch_id="x"))
    assert refusal == BatchRefusal("x", "unknown peer", Drop.NOT_A_MEMBER)
    assert check("w9", _batch("w8")) is Drop.NOT_A_MEMBER
    assert check("w9", _batch("w9", job="other")) is Drop.NOT_A_MEMBER
    assert check("w9", b"junk") is Drop.NOT_A_MEMBER


def _newer(origin="w1", job="j", batch_id="b-9"):
    frame = RecordBatch(
        schema_version=codec.BATCH_SCHEMA_VERSION + 1,
        job=job,
        batch_id=batch_id,
        origin_worker=origin,
        topic="t",
        partitions=[0],
        offsets=[1],
        timestamps_ms=[0],
        payload_lengths=[1],
        payloads=b"x",
    )
    return frame.SerializeToString()


def test_a_batch_of_a_newer_schema_version_is_answered_rejected():
    """A newer ``schema_version`` was dropped without an answer, so each
    cost its sender a whole ACK timeout during a rolling upgrade."""
    refusal = check_batch("w1", _newer(), members={"w1"}, job="j", curve=False)
    assert isinstance(refusal, BatchRefusal)
    assert (refusal.batch_id, refusal.why) == ("b-9", Drop.NEWER_SCHEMA)
    assert f"schema version {codec.BATCH_SCHEMA_VERSION + 1}" in refusal.reason
    # only the sender's own batch of this job is answered
    assert check_batch("w1", _newer("w2"), members={"w1"}, job="j", curve=False) is (Drop.MALFORMED)


def test_a_batch_of_a_topic_the_job_does_not_read_is_refused():
    """A peer's batch must not make this worker dead-letter (and so
    create) arbitrary ``<topic>.dlq`` topics."""
    got = check_batch("w1", _batch(), members={"w1"}, job="j", curve=False, topics={"other"})
    assert isinstance(got, BatchRefusal) and got.why is Drop.FOREIGN_TOPIC
    assert "'t'" in got.reason
    taken = check_batch("w1", _batch(), members={"w1"}, job="j", curve=False, topics={"t"})
    assert not isinstance(taken, Drop | BatchRefusal)


def test_routing_ids_name_the_worker_and_carry_a_nonce():
    route = routing_id("w1", b"0123456789abcdef")
    assert sender_of(route) == "w1"
    assert route != routing_id("w1", b"fedcba9876543210")
    assert sender_of(b"w1") is None  # a bare worker id is not one of ours
    assert sender_of(b"\x00nonce") is None
    assert sender_of(b"\xff\xfe\x00nonce") is None


def test_control_frames_from_a_receiver():
    ack = codec.encode_ack(
        job="j", batch_id="b", receiver="r", status=BatchAck.ACKED, reason="", at_ms=0
    )
    assert isinstance(check_control([codec.KIND_ACK, ack], "r"), BatchAck)
    assert check_control([codec.KIND_ACK, ack], "other") is Drop.IMPOSTOR
    grant = wire.encode(CreditGrant(job="j", receiver_worker="r", credit_records=5))
    assert isinstance(check_control([codec.KIND_CREDIT, grant], "r"), CreditGrant)
    assert check_control([codec.KIND_CREDIT, grant], "other") is Drop.IMPOSTOR
    assert check_control([codec.KIND_ACK], "r") is Drop.MALFORMED
    assert check_control([codec.KIND_ACK, b"\xff\xff"], "r") is Drop.MALFORMED
    state = codec.encode_state(
        job="j", worker_id="r", state=WorkerStateEvent.LEFT, sequence=1, queue_records=0, at_ms=0
    )
    assert check_control([codec.KIND_STATE, state], "r") is Drop.MALFORMED


def _event(worker="w1", job="j", state=WorkerStateEvent.RECEIVING):
    return codec.encode_state(
        job=job, worker_id=worker, state=state, sequence=3, queue_records=0, at_ms=0
    )


def test_state_events_of_the_peer_whose_socket_they_came_on():
    got = check_event([codec.KIND_STATE, _event()], peer="w1", job="j")
    assert isinstance(got, WorkerStateEvent) and got.sequence == 3
    assert check_event([codec.KIND_STATE, _event(job="x")], peer="w1", job="j") is Drop.IMPOSTOR
    assert check_event([codec.KIND_ACK, _event()], peer="w1", job="j") is Drop.MALFORMED
    assert check_event([codec.KIND_STATE, b"\xff"], peer="w1", job="j") is Drop.MALFORMED


def test_nobody_announces_another_workers_state_or_departure():
    """A forged ``LEFT`` marked another worker gone; events now count
    only from the peer whose SUB socket they arrived on."""
    for state in (WorkerStateEvent.LEFT, WorkerStateEvent.RECEIVING):
        forged = [codec.KIND_STATE, _event("w2", state=state)]
        assert check_event(forged, peer="w1", job="j") is Drop.IMPOSTOR


# -- mailbox ------------------------------------------------------------------------------


def _readable(fd):
    return bool(select.select([fd], [], [], 0)[0])


def test_the_mailbox_wakes_once_and_hands_over_in_order():
    mailbox = Mailbox()
    try:
        assert not _readable(mailbox.fd)
        mailbox.remote_batch_trained("w1", "b1", 10)
        mailbox.state_changed(True, 3, 1)
        mailbox.remote_batch_trained("w2", "b2", 20)
        mailbox.overflow_ready()
        assert _readable(mailbox.fd)
        assert mailbox.take() == (True, [("w1", "b1", 10), ("w2", "b2", 20)])
        assert mailbox.take() == (False, [])
        mailbox.woken()
        assert not _readable(mailbox.fd)
        mailbox.overflow_ready()
        assert _readable(mailbox.fd)
    finally:
        mailbox.close()
    mailbox.close()  # idempotent
    mailbox.wake()  # after close: nothing to wake, no error


# -- counters -----------------------------------------------------------------------------


def test_a_snapshot_is_a_copy_of_the_counters_plus_what_is_measured():
    extra = ("in_flight_batches", "ack_rtt_p50_ms", "ack_rtt_p99_ms")
    stats_fields = [f.name for f in dataclasses.fields(ForwardingStats)]
    assert [*COUNTER_NAMES, *extra] == stats_fields
    assert tuple(f.name for f in dataclasses.fields(ForwardingCounters)) == COUNTER_NAMES
    counters = Counters()
    counters.totals.batches_sent += 2
    counters.totals.unknown_peer_frames_dropped += 1
    counters.add_rtt(4.0)
    snapshot = counters.snapshot(in_flight_batches=1)
    assert (snapshot.batches_sent, snapshot.unknown_peer_frames_dropped) == (2, 1)
    assert (snapshot.in_flight_batches, snapshot.ack_rtt_p50_ms) == (1, 4.0)
    counters.totals.batches_sent += 1
    assert snapshot.batches_sent == 2  # the snapshot does not follow later counts
