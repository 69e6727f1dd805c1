"""The ShuffleUnit's queue, overflow, policies, receiver state and acknowledgements."""

import threading

import pytest

from streamtrain.errors import ConfigError
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.unit import ShuffleUnit
from streamtrain.testing import RecordingAcknowledger, records


class Listener:
    """Records what the unit reports (a real implementation of ShuffleListener)."""

    def __init__(self):
        self.states = []
        self.trained = []
        self.overflow_signals = 0

    def state_changed(self, receiving, queue_records, sequence):
        self.states.append((receiving, queue_records, sequence))

    def remote_batch_trained(self, origin_worker, batch_id, records):
        self.trained.append((origin_worker, batch_id, records))

    def overflow_ready(self):
        self.overflow_signals += 1


def small_settings(policy=ShufflePolicy.ADVANCED, **kw):
    """A worker with a 50-record queue (watermarks 10/40), overrides in ``kw``."""
    return ShuffleSettings(
        job="j",
        worker_id="w",
        policy=policy,
        **(
            {
                "queue_capacity_records": 50,
                "low_watermark_records": 10,
                "high_watermark_records": 40,
                "overflow_capacity_records": 100,
                "batch_records": 20,
                "credit_window_records": 100,
            }
            | kw
        ),
    )


def _unit(policy=ShufflePolicy.ADVANCED, **kw):
    acks = RecordingAcknowledger()
    unit = ShuffleUnit(small_settings(policy, **kw), acks)
    listener = Listener()
    unit.set_listener(listener)
    return unit, acks, listener


def test_advanced_overflows_past_capacity_and_refills_on_take():
    unit, acks, listener = _unit()
    assert unit.put(records(0, 80)) is None
    stats = unit.stats()
    assert (stats.queue_records, stats.overflow_records) == (50, 30)
    assert listener.overflow_signals >= 1
    batch = unit.take(50)
    assert batch is not None and batch.origin_worker is None
    assert batch.columns.offsets.tolist() == list(range(50))
    assert unit.stats().queue_records == 30  # refilled from the overflow
    assert unit.stats().overflow_records == 0
    assert unit.ack(batch)
    assert acks.covered("t", 0) == [(0, 49)]
    assert not unit.ack(batch)


def test_full_overflow_pushes_back_without_losing_records():
    unit, _, _ = _unit()
    rest = unit.put(records(0, 200), timeout_s=0.05)
    assert rest is not None
    assert rest.offsets.tolist() == list(range(150, 200))
    stats = unit.stats()
    assert stats.queue_records + stats.overflow_records + len(rest) == 200
    assert stats.local_records_in == 150


def test_blocked_put_resumes_when_the_trainer_makes_room():
    unit, _, _ = _unit()
    result = []
    thread = threading.Thread(target=lambda: result.append(unit.put(records(0, 170), timeout_s=5)))
    thread.start()
    batch = unit.take(30, timeout_s=5)
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert batch is not None
    assert result == [None]


def test_receiver_state_transitions_are_reported_with_increasing_sequence():
    unit, _, listener = _unit()
    assert unit.receiver_state() == (True, 0, 0)
    unit.put(records(0, 45))  # passes the high watermark (40)
    assert listener.states == [(False, 45, 1)]
    assert not unit.deliver_remote("peer", "b1", records(0, 5, forwarded=True))
    unit.take(20)  # 25 left: still refusing (hysteresis)
    assert len(listener.states) == 1
    unit.take(16)  # 9 left: below the low watermark
    assert listener.states[-1] == (True, 9, 2)
    assert unit.deliver_remote("peer", "b1", records(0, 5, forwarded=True))


def test_remote_batch_acknowledged_once_every_piece_is_trained():
    unit, acks, listener = _unit()
    assert unit.deliver_remote("peer", "b7", records(500, 30, partition=3, forwarded=True))
    first = unit.take(12)
    second = unit.take(100)
    assert first is not None and second is not None
    assert first.origin_worker == "peer"
    assert (len(first), len(second)) == (12, 18)
    unit.ack(second)
    assert listener.trained == []
    unit.ack(first)
    assert listener.trained == [("peer", "b7", 30)]
    assert acks.partitions() == []  # the origin's tracker is told, not ours


def test_forwarded_records_are_never_forwarded_again():
    unit, _, _ = _unit()
    for i in range(3):  # 90 forwarded records: the queue is far past capacity
        assert unit.deliver_remote("peer", f"b{i}", records(i * 30, 30, forwarded=True)) or i > 0
    assert unit.pop_overflow(1000) is None
    unit.put(records(1000, 10))  # local records overflow, forwarded ones stay queued
    popped = unit.pop_overflow(1000)
    assert popped is not None
    assert not popped.forwarded
    assert popped.offsets.tolist() == list(range(1000, 1010))


def test_origin_commits_only_after_the_receivers_ack():
    unit, acks, _ = _unit()
    unit.put(records(0, 70))
    forwarded = unit.pop_overflow(20)
    assert forwarded is not None
    local = unit.take(50)
    assert local is not None
    unit.ack(local)
    assert unit.stats().in_flight_records == 20
    assert acks.position("t", 0) == 50  # records 50..69 are in flight, not acknowledged
    unit.ack_forwarded(forwarded)
    assert acks.position("t", 0) == 70
    assert unit.stats().in_flight_records == 0


def test_returned_batches_go_first():
    unit, _, _ = _unit(queue_capacity_records=40)
    unit.put(records(0, 100))
    first = unit.pop_overflow(20)
    assert first is not None
    unit.return_overflow(first)
    again = unit.pop_overflow(20)
    assert again is not None
    assert again.offsets.tolist() == first.offsets.tolist()


def test_records_that_came_back_are_counted_when_popped_again():
    unit, _, _ = _unit(queue_capacity_records=40)
    unit.put(records(0, 100))  # 60 overflow
    first = unit.pop_overflow(20)
    assert first is not None and unit.resent_records_popped == 0
    unit.return_overflow(first)  # rejected: back to the front
    again = unit.pop_overflow(30)  # the 20 that came back, then 10 first sends
    assert again is not None and len(again) == 20
    assert unit.resent_records_popped == 20
    fresh = unit.pop_overflow(10)
    assert fresh is not None and unit.resent_records_popped == 20
    # a batch that could not be sent at all goes back as it was: not a re-send
    unit.unpop_overflow(fresh, 0)
    assert unit.pop_overflow(10) is not None
    assert unit.resent_records_popped == 20
    unit.return_overflow(again)
    half = unit.pop_overflow(5)
    assert half is not None and unit.resent_records_popped == 25
    unit.unpop_overflow(half, 5)  # not sent: its five stay re-sends, uncounted
    assert unit.resent_records_popped == 20
    assert len(unit.pop_overflow(20) or ()) == 5  # the head chunk: the five put back
    assert len(unit.pop_overflow(20) or ()) == 15
    assert unit.resent_records_popped == 40


def test_returned_batch_is_trained_locally_when_there_is_room():
    unit, _, _ = _unit()
    unit.put(records(0, 60))
    flight = unit.pop_overflow(10)
    assert flight is not None
    while unit.take(50, timeout_s=0) is not None:
        pass
    unit.return_overflow(flight)  # timed out: the local queue has room now
    batch = unit.take(50)
    assert batch is not None and batch.columns.offsets.tolist() == list(range(50, 60))


def test_policy_none_never_shares():
    unit, _, listener = _unit(ShufflePolicy.NONE)
    assert unit.receiver_state()[0] is False
    rest = unit.put(records(0, 80), timeout_s=0.05)
    assert rest is not None and len(rest) == 30
    assert unit.pop_overflow(100) is None
    assert not unit.deliver_remote("peer", "b", records(0, 1, forwarded=True))
    assert listener.states == []


def test_policy_basic_shares_evenly_regardless_of_need():
    unit, _, _ = _unit(ShufflePolicy.BASIC)
    unit.put(records(0, 40))  # no peers: everything local
    assert unit.stats().overflow_records == 0
    unit.take(100)
    unit.set_peer_count(3)
    unit.put(records(100, 40))
    stats = unit.stats()
    assert (stats.queue_records, stats.overflow_records) == (10, 30)
    assert unit.deliver_remote("peer", "b", records(0, 45, forwarded=True))
    assert unit.deliver_remote("peer", "c", records(0, 1, forwarded=True))  # even above high
    while unit.take(100, timeout_s=0) is not None:
        pass
    assert unit.stats().overflow_records == 30  # basic keeps sharing while peers exist
    unit.set_peer_count(0)  # peers gone: the shared part is trained here
    assert unit.stats().overflow_records == 0


def test_take_and_put_edges():
    unit, _, _ = _unit()
    assert unit.take(10, timeout_s=0.01) is None
    with pytest.raises(ConfigError):
        unit.take(0)
    with pytest.raises(ConfigError, match="deliver_remote"):
        unit.put(records(0, 1, forwarded=True))
    assert unit.put(records(0, 0)) is None


def test_drop_removes_own_queued_and_overflow_records_of_revoked_partitions():
    unit, _, _ = _unit()
    assert unit.deliver_remote("peer", "b", records(0, 5, partition=1, forwarded=True))
    assert unit.put(records(0, 40, partition=1)) is None
    assert unit.put(records(0, 40, partition=2)) is None  # 5 + 40 + 5 queued, 35 overflow
    handed = unit.take(10)  # the trainer holds the 5 forwarded records
    assert handed is not None and handed.origin_worker == "peer"
    second = unit.take(10)  # and 10 of its own partition 1: they stay its
    assert second is not None and second.origin_worker is None
    assert unit.drop("t", {1}) == 30
    stats = unit.stats()
    assert (stats.queue_records, stats.overflow_records) == (40, 0)  # refilled from overflow
    assert unit.ack(second)
    assert unit.drop("t", set()) == 0


@pytest.mark.parametrize("policy", [ShufflePolicy.ADVANCED, ShufflePolicy.BASIC])
def test_stop_receiving_refuses_peers_for_good_and_says_so(policy):
    unit, _, listener = _unit(policy)
    assert unit.deliver_remote("peer", "b1", records(0, 5, forwarded=True))
    unit.stop_receiving()
    assert listener.states[-1][0] is False
    assert not unit.deliver_remote("peer", "b2", records(5, 5, forwarded=True))
    batch = unit.take(10)  # below the low watermark: it would accept again, but not now
    assert batch is not None and unit.ack(batch)
    assert unit.receiver_state()[0] is False
    assert not unit.deliver_remote("peer", "b3", records(10, 5, forwarded=True))
    assert listener.trained == [("peer", "b1", 5)]  # what it had is still trained and acked
