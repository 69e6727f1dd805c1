"""Holdings: a worker cuts fetched records to its shards and reports them done when acked."""

import numpy as np

from streamtrain.shards import Grant, Holdings, ShardRange

T = "clicks"


def grant(p, start, end, epoch=1):
    return Grant(ShardRange(T, p, start, end), "w", epoch)


def offsets(*values):
    return np.array(values, dtype=np.int64)


def test_records_past_a_shards_end_are_cut_off():
    h = Holdings()
    assert h.add(grant(0, 10, 15))
    assert h.read_positions() == {(T, 0): 10}
    keep = h.accept(T, 0, np.arange(10, 20, dtype=np.int64))
    assert keep.tolist() == [True] * 5 + [False] * 5
    assert h.read_positions() == {}
    assert h.take_finished() == []  # read, not acknowledged
    assert h.ack(T, 0, 10, 19) == 5
    [done] = h.take_finished()
    assert done.range == ShardRange(T, 0, 10, 15)
    assert len(h) == 0


def test_a_contiguous_next_shard_takes_the_records_after_the_first():
    h = Holdings()
    h.add(grant(0, 0, 5))
    h.add(grant(0, 5, 10, epoch=2))
    keep = h.accept(T, 0, np.arange(0, 8, dtype=np.int64))
    assert keep.all()
    assert h.read_positions() == {(T, 0): 8}
    h.ack(T, 0, 0, 7)
    assert [d.range.end_offset for d in h.take_finished()] == [5]


def test_a_shard_is_not_done_until_every_handed_out_record_is_acked():
    h = Holdings()
    h.add(grant(1, 0, 6))
    h.accept(T, 1, offsets(0, 1, 2))
    h.accept(T, 1, offsets(3, 4, 5))
    h.ack(T, 1, 3, 5)
    assert h.take_finished() == []
    h.ack(T, 1, 0, 1)
    assert h.take_finished() == []
    h.ack(T, 1, 2, 2)
    assert len(h.take_finished()) == 1


def test_gaps_at_the_end_are_read_when_the_position_passes_the_end():
    h = Holdings()
    h.add(grant(0, 0, 10))
    h.accept(T, 0, offsets(0, 1, 2, 3))  # 4..9 are transaction markers
    h.ack(T, 0, 0, 3)
    assert h.take_finished() == []
    h.position(T, 0, 10)
    assert len(h.take_finished()) == 1


def test_overlapping_grants_are_refused_and_unstarted_shards_are_listed():
    h = Holdings()
    assert h.add(grant(0, 0, 10))
    assert not h.add(grant(0, 5, 15))
    assert h.add(grant(0, 20, 30))
    h.accept(T, 0, offsets(0, 1))
    assert [x.range.start_offset for x in h.unstarted()] == [20]
    dropped = h.drop([ShardRange(T, 0, 20, 30)])
    assert len(dropped) == 1 and len(h) == 1


def test_records_of_partitions_not_held_are_dropped():
    h = Holdings()
    h.add(grant(0, 0, 10))
    assert not h.accept(T, 1, offsets(0, 1)).any()
    assert h.ack(T, 1, 0, 1) == 0


def test_unread_records_count_what_is_left_to_fetch():
    h = Holdings()
    h.add(grant(0, 0, 10))
    h.add(grant(1, 100, 130))
    assert (h.unread(), h.unread_records()) == (2, 40)
    h.accept(T, 0, np.arange(0, 4, dtype=np.int64))
    assert (h.unread(), h.unread_records()) == (2, 36)
    h.accept(T, 0, np.arange(4, 12, dtype=np.int64))  # read to its end
    assert (h.unread(), h.unread_records()) == (1, 30)
