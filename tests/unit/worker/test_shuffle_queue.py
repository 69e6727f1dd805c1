"""ShuffleQueue: the ingest consumer's record queue over a ShuffleNode (not started: no
sockets; the node's unit does the queueing, the queue maps acknowledgements)."""

import time

import numpy as np

from streamtrain.records import RecordColumns
from streamtrain.shuffle.membership import MemberDirectory, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.testing import RecordingAcknowledger, records
from streamtrain.worker.shuffle_queue import ShuffleQueue
from tests.unit.shuffle.test_unit import Listener, small_settings


def _queue(policy=ShufflePolicy.ADVANCED, **kw):
    settings = small_settings(policy, **({"overflow_capacity_records": 50} | kw))
    acks = RecordingAcknowledger()
    node = ShuffleNode(settings, acks, StaticMembership(MemberDirectory()))
    listener = Listener()
    node.unit.set_listener(listener)
    return ShuffleQueue(node, acks), acks, listener


def test_put_never_blocks_and_reports_full_until_the_node_takes_the_rest():
    queue, _, _ = _queue()
    queue.put(records(0, 130))  # 50 queued + 50 overflow; 30 wait here
    assert queue.records == 130
    assert queue.full
    assert queue.capacity_records == 100
    taken = []
    while (chunk := queue.get(25, timeout_s=0.01)) is not None:
        taken.append(chunk)
        queue.full  # noqa: B018 - the fetch thread asks on every loop: pending moves in
    offsets = np.concatenate([c.offsets for c in taken])
    assert offsets.tolist() == list(range(130))  # nothing lost, order kept
    assert queue.records == 0 and not queue.full


def test_whole_chunk_acknowledgement_reaches_the_tracker():
    queue, acks, _ = _queue()
    queue.put(records(100, 20, partition=2))
    chunk = queue.get(20, timeout_s=0.1)
    assert chunk is not None
    assert acks.partitions() == []
    assert queue.acknowledge(chunk) == 20
    assert acks.covered("t", 2) == [(100, 119)]
    assert queue.settled


def test_a_record_waiting_for_its_dead_letter_holds_back_only_its_own_offset():
    """One record whose dead letter was not delivered held back the
    acknowledgement of its whole chunk."""
    queue, acks, _ = _queue()
    queue.put(records(0, 10))
    chunk = queue.get(10, timeout_s=0.1)
    assert chunk is not None
    dead_lettered = chunk.take(np.array([3, 7]))
    trained = chunk.take(np.array([0, 1, 2, 4, 5, 6, 8, 9]))
    queue.acknowledge(trained)
    # the trained records count at once; 3 and 7 still wait for the dead-letter delivery
    assert acks.covered("t", 0) == [(0, 2), (4, 6), (8, 9)]
    assert queue.node.unit.stats().records_trained == 0  # the chunk is not complete yet
    queue.acknowledge(dead_lettered)
    assert acks.covered("t", 0) == [(0, 9)]
    assert queue.node.unit.stats().records_trained == 10


def test_forwarded_batch_is_acknowledged_to_its_origin_once_every_part_is():
    queue, acks, listener = _queue()
    assert queue.node.unit.deliver_remote("peer", "b1", records(500, 12, 5, forwarded=True))
    chunk = queue.get(20, timeout_s=0.1)
    assert chunk is not None and chunk.forwarded
    queue.acknowledge(chunk.take(slice(0, 5)))
    assert listener.trained == []
    queue.acknowledge(chunk.take(slice(5, 12)))
    assert listener.trained == [("peer", "b1", 12)]
    assert acks.partitions() == []  # a peer's records never reach this worker's tracker
    queue.acknowledge(chunk)  # acknowledged twice: ignored
    assert listener.trained == [("peer", "b1", 12)]


def test_same_offsets_from_two_chunks_are_told_apart_by_origin():
    queue, acks, listener = _queue()
    queue.put(records(0, 5))
    assert queue.node.unit.deliver_remote("peer", "b2", records(0, 5, forwarded=True))
    mine = queue.get(5, timeout_s=0.1)
    theirs = queue.get(5, timeout_s=0.1)
    assert mine is not None and theirs is not None
    assert not mine.forwarded and theirs.forwarded
    queue.acknowledge(theirs.take(slice(0, 5)))  # a copy: matched by keys, not identity
    assert listener.trained == [("peer", "b2", 5)]
    assert acks.partitions() == []
    queue.acknowledge(mine.take(slice(0, 5)))
    assert acks.covered("t", 0) == [(0, 4)]


def test_drop_removes_own_records_of_revoked_partitions_but_not_forwarded_ones():
    queue, _, _ = _queue()
    assert queue.node.unit.deliver_remote("peer", "b3", records(0, 7, 1, forwarded=True))
    queue.put(records(0, 40, partition=1))
    queue.put(records(0, 40, partition=2))  # 3 queued, 37 in the overflow
    queue.put(records(40, 30, partition=1))  # 13 overflow, 17 pending
    assert queue.full
    assert queue.drop("t", {1}) == 70
    assert queue.drop("other", {2}) == 0
    left = []
    while (chunk := queue.get(100, timeout_s=0.01)) is not None:
        left.append((chunk.forwarded, sorted(set(chunk.partitions.tolist())), len(chunk)))
    assert sum(n for forwarded, _, n in left if not forwarded) == 40
    assert all(parts == [2] for forwarded, parts, _ in left if not forwarded)
    assert [n for forwarded, _, n in left if forwarded] == [7]


def test_get_returns_none_after_close_without_waiting_the_timeout():
    queue, _, _ = _queue()
    queue.close()
    started = time.monotonic()
    assert queue.get(10, timeout_s=30) is None
    assert time.monotonic() - started < 5


def test_settled_counts_records_in_flight_to_a_peer():
    queue, _, _ = _queue()
    queue.put(records(0, 60))  # 10 go to the overflow
    sent = queue.node.unit.pop_overflow(10)
    assert sent is not None
    while (chunk := queue.get(100, timeout_s=0.01)) is not None:
        queue.acknowledge(chunk)
    assert not queue.settled  # 10 records at a receiver, not acknowledged yet
    queue.node.unit.ack_forwarded(sent)
    assert queue.settled


def test_rejected_records_a_chunk_never_held_go_straight_to_the_tracker():
    queue, acks, _ = _queue()
    stray = RecordColumns.from_values("t", [4, 4], [8, 9], [0, 0], [b"a", b"b"])
    assert queue.acknowledge(stray) == 2
    assert acks.covered("t", 4) == [(8, 9)]


def test_basic_policy_keeps_feeding_the_trainer_when_the_overflow_is_full():
    queue, _, _ = _queue(ShufflePolicy.BASIC, overflow_capacity_records=20)
    queue.node.unit.set_peer_count(1)  # half of what is read is a peer's share
    queue.put(records(0, 40))  # 20 shared (overflow full), 20 local
    queue.put(records(40, 40))  # the overflow is full: its share is trained here
    queue.put(records(80, 40))
    assert queue.node.unit.stats().overflow_records == 20
    got = 0
    while (chunk := queue.get(100, timeout_s=0.01)) is not None:
        got += len(chunk)
        queue.full  # noqa: B018 - as the fetch thread does
    assert got == 100  # everything but the 20 records waiting for a peer
    assert queue.records == 20
