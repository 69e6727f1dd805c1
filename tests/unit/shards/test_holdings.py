"""Holdings: a worker cuts fetched records to its shards, tags each with its lease, and
reports a shard done when every record read under its lease was acknowledged."""

import numpy as np

from streamtrain.shards import Grant, Holdings, ShardRange
from streamtrain.shards.holdings import NO_LEASE

T = "clicks"


def grant(p, start, end, epoch=1):
    return Grant(ShardRange(T, p, start, end), "w", epoch)


def offsets(*values):
    return np.array(values, dtype=np.int64)


def test_records_past_a_shards_end_are_cut_off():
    h = Holdings()
    held = h.add(grant(0, 10, 15))
    assert held is not None
    assert h.read_positions() == {(T, 0): 10}
    leases = h.accept(T, 0, np.arange(10, 20, dtype=np.int64))
    assert leases.tolist() == [held.lease_id] * 5 + [NO_LEASE] * 5
    assert h.read_positions() == {}
    assert h.take_finished() == []  # read, not acknowledged
    assert h.ack(leases) == 5
    [done] = h.take_finished()
    assert done.range == ShardRange(T, 0, 10, 15)
    assert len(h) == 0


def test_a_contiguous_next_shard_takes_the_records_after_the_first():
    h = Holdings()
    first = h.add(grant(0, 0, 5))
    second = h.add(grant(0, 5, 10, epoch=2))
    assert first is not None and second is not None
    leases = h.accept(T, 0, np.arange(0, 8, dtype=np.int64))
    assert leases.tolist() == [first.lease_id] * 5 + [second.lease_id] * 3
    assert h.read_positions() == {(T, 0): 8}
    h.ack(leases)
    assert [d.range.end_offset for d in h.take_finished()] == [5]


def test_a_shard_is_not_done_until_every_handed_out_record_is_acked():
    h = Holdings()
    h.add(grant(1, 0, 6))
    one = h.accept(T, 1, offsets(0, 1, 2))
    two = h.accept(T, 1, offsets(3, 4, 5))
    h.ack(two)
    assert h.take_finished() == []
    h.ack(one[:2])
    assert h.take_finished() == []
    h.ack(one[2:])
    assert len(h.take_finished()) == 1


def test_gaps_at_the_end_are_read_when_the_position_passes_the_end():
    h = Holdings()
    h.add(grant(0, 0, 10))
    h.ack(h.accept(T, 0, offsets(0, 1, 2, 3)))  # 4..9 are transaction markers
    assert h.take_finished() == []
    h.position(T, 0, 10)
    assert len(h.take_finished()) == 1


def test_overlapping_grants_are_refused_and_unstarted_shards_are_listed():
    h = Holdings()
    assert h.add(grant(0, 0, 10))
    assert h.add(grant(0, 5, 15)) is None
    assert h.add(grant(0, 20, 30))
    h.accept(T, 0, offsets(0, 1))
    assert [x.range.start_offset for x in h.unstarted()] == [20]
    dropped = h.drop([ShardRange(T, 0, 20, 30)])
    assert len(dropped) == 1 and len(h) == 1


def test_records_of_partitions_not_held_are_dropped():
    h = Holdings()
    h.add(grant(0, 0, 10))
    leases = h.accept(T, 1, offsets(0, 1))
    assert (leases == NO_LEASE).all()
    assert h.ack(leases) == 0


def test_unread_records_count_what_is_left_to_fetch():
    h = Holdings()
    h.add(grant(0, 0, 10))
    h.add(grant(1, 100, 130))
    assert (h.unread(), h.unread_records()) == (2, 40)
    h.accept(T, 0, np.arange(0, 4, dtype=np.int64))
    assert (h.unread(), h.unread_records()) == (2, 36)
    h.accept(T, 0, np.arange(4, 12, dtype=np.int64))  # read to its end
    assert (h.unread(), h.unread_records()) == (1, 30)


def test_records_of_a_shard_taken_away_never_count_toward_its_next_grant():
    """The stale-ack defect: 0..599 of [0,1000) were queued when the shard was taken
    away; [200,1000) came back under a new grant. Counting acks by offset, the stale
    copies of 200..599 filled in for 600..999, which were never trained."""
    h = Holdings()
    old = h.add(grant(0, 0, 1000, epoch=1))
    assert old is not None
    stale = h.accept(T, 0, np.arange(0, 600, dtype=np.int64))
    h.drop([old.range])
    new = h.add(grant(0, 200, 1000, epoch=3))
    assert new is not None
    fresh = h.accept(T, 0, np.arange(200, 1000, dtype=np.int64))
    assert h.ack(stale) == 0  # the trainer finishes the stale batch: counts for nothing
    assert h.ack(fresh[:400]) == 400  # then the new copies of 200..599
    assert h.take_finished() == []  # 600..999 still untrained
    h.ack(fresh[400:])
    [done] = h.take_finished()
    assert done.lease_id == new.lease_id


def test_only_records_of_shards_still_held_are_worth_training():
    h = Holdings()
    old = h.add(grant(0, 0, 10))
    kept = h.add(grant(1, 0, 10))
    assert old is not None and kept is not None
    stale = h.accept(T, 0, np.arange(0, 4, dtype=np.int64))
    live = h.accept(T, 1, np.arange(0, 4, dtype=np.int64))
    both = np.concatenate([stale, live, offsets(NO_LEASE)])
    assert h.holds(both).tolist() == [True] * 8 + [False]
    h.drop([old.range])
    assert h.holds(both).tolist() == [False] * 4 + [True] * 4 + [False]
    h.drop([kept.range])
    assert not h.holds(both).any()


def test_a_lease_id_is_never_given_twice():
    h = Holdings()
    ids = set()
    for epoch in range(1, 50):
        held = h.add(grant(0, 0, 10, epoch))
        assert held is not None
        ids.add(held.lease_id)
        h.drop([held.range])
    assert len(ids) == 49
