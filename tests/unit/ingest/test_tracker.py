"""OffsetTracker: the at-least-once contract shared with the shuffle layer."""

import random
import threading

import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.tracker import OffsetTracker

T = "clicks"


def tracker_with(*partitions, committed=-1):
    tracker = OffsetTracker()
    for p in partitions:
        tracker.assign(T, p, committed)
    return tracker


def test_nothing_committable_until_something_is_acked():
    tracker = tracker_with(0)
    assert tracker.committable() == {}
    tracker.handed_out(T, 0, 0, 99)
    assert tracker.committable() == {}
    assert tracker.in_flight_records() == 100


def test_contiguous_prefix_is_committable_out_of_order_acks_wait():
    tracker = tracker_with(0)
    tracker.handed_out(T, 0, 0, 9)
    tracker.handed_out(T, 0, 10, 19)
    tracker.handed_out(T, 0, 20, 29)
    assert tracker.ack(T, 0, 10, 19) == 10  # out of order: the prefix is still 0
    assert tracker.committable() == {}
    assert tracker.ack(T, 0, 0, 9) == 10
    assert tracker.committable() == {(T, 0): 20}
    assert tracker.ack(T, 0, 20, 29) == 10
    assert tracker.committable() == {(T, 0): 30}


def test_partial_ranges_and_acks_spanning_hand_outs():
    tracker = tracker_with(0)
    tracker.handed_out(T, 0, 0, 99)
    assert tracker.ack(T, 0, 0, 49) == 50
    assert tracker.committable() == {(T, 0): 50}
    assert tracker.ack(T, 0, 60, 69) == 10
    assert tracker.committable() == {(T, 0): 50}
    assert tracker.ack(T, 0, 40, 200) == 40  # 50..59 and 70..99; the rest was not in flight
    assert tracker.committable() == {(T, 0): 100}
    assert tracker.in_flight_records() == 0


def test_gaps_between_hand_outs_do_not_block_the_prefix():
    tracker = tracker_with(0, committed=0)
    tracker.handed_out(T, 0, 0, 4)
    tracker.handed_out(T, 0, 7, 9)  # 5 and 6 are not records (compaction, txn markers)
    tracker.ack(T, 0, 7, 9)
    assert tracker.committable() == {}
    tracker.ack(T, 0, 0, 4)
    assert tracker.committable() == {(T, 0): 10}


def test_first_hand_out_after_the_committed_offset_is_not_a_hole():
    tracker = tracker_with(0, committed=100)
    tracker.handed_out(T, 0, 150, 159)  # 100..149 were deleted by retention
    tracker.ack(T, 0, 150, 159)
    assert tracker.committable() == {(T, 0): 160}


def test_committable_only_where_it_advanced_since_mark_committed():
    tracker = tracker_with(0, 1)
    tracker.handed_out(T, 0, 0, 9)
    tracker.handed_out(T, 1, 0, 9)
    tracker.ack(T, 0, 0, 9)
    tracker.ack(T, 1, 0, 4)
    assert tracker.committable() == {(T, 0): 10, (T, 1): 5}
    tracker.mark_committed({(T, 0): 10, (T, 1): 5})
    assert tracker.committable() == {}
    tracker.ack(T, 1, 5, 9)
    assert tracker.committable() == {(T, 1): 10}
    tracker.mark_committed({(T, 1): 3})  # never backwards
    assert tracker.committable() == {(T, 1): 10}


def test_assign_with_committed_offset_does_not_report_it_again():
    tracker = tracker_with(0, committed=42)
    assert tracker.committable() == {}
    tracker.handed_out(T, 0, 42, 45)
    tracker.ack(T, 0, 42, 45)
    assert tracker.committable() == {(T, 0): 46}


def test_stale_acks_are_ignored_and_counted():
    tracker = tracker_with(0)
    tracker.handed_out(T, 0, 0, 9)
    assert tracker.ack(T, 1, 0, 9) == 0  # never assigned
    assert tracker.ack(T, 0, 20, 29) == 0  # not in flight
    assert tracker.ack(T, 0, 0, 9) == 10
    assert tracker.ack(T, 0, 0, 9) == 0  # twice
    assert tracker.stale_acks == 3


def test_revoke_drops_in_flight_records_and_later_acks_are_stale():
    tracker = tracker_with(0, 1)
    tracker.handed_out(T, 0, 0, 9)
    tracker.handed_out(T, 1, 0, 9)
    tracker.revoke(T, 0)
    assert tracker.assigned() == {(T, 1)}
    assert tracker.ack(T, 0, 0, 9) == 0
    assert tracker.stale_acks == 1
    assert tracker.in_flight_records() == 10
    tracker.handed_out(T, 0, 10, 19)  # a fetch that raced the revoke: not tracked
    assert tracker.ignored_handouts == 1
    assert tracker.committable() == {}


def test_reassign_starts_afresh_from_the_committed_offset():
    tracker = tracker_with(0)
    tracker.handed_out(T, 0, 0, 9)
    tracker.assign(T, 0, 5)
    assert tracker.in_flight_records() == 0
    tracker.handed_out(T, 0, 5, 9)
    tracker.ack(T, 0, 5, 9)
    assert tracker.committable() == {(T, 0): 10}


def test_redelivered_offsets_merge_with_what_is_in_flight():
    tracker = tracker_with(0)
    tracker.handed_out(T, 0, 0, 9)
    tracker.handed_out(T, 0, 5, 14)  # overlaps: 10..14 new
    assert tracker.in_flight_records() == 15
    assert tracker.ack(T, 0, 0, 14) == 15
    assert tracker.committable() == {(T, 0): 15}


def test_progress_reports_committed_consumed_and_in_flight():
    tracker = tracker_with(0, committed=3)
    tracker.handed_out(T, 0, 3, 12)
    tracker.ack(T, 0, 3, 7)
    progress = tracker.progress()[(T, 0)]
    assert (progress.committed, progress.consumed, progress.in_flight_records) == (3, 13, 5)


@pytest.mark.parametrize(("first", "last"), [(-1, 3), (5, 4)])
def test_bad_ranges_are_rejected(first, last):
    tracker = tracker_with(0)
    with pytest.raises(ConfigError):
        tracker.handed_out(T, 0, first, last)
    with pytest.raises(ConfigError):
        tracker.ack(T, 0, first, last)


def _naive_next(handed: set[int], acked: set[int], high: int | None) -> int | None:
    """The lowest unacknowledged record, else one past the last; only once it passed the first."""
    if not handed:
        return None
    pending = handed - acked
    position = min(pending) if pending else high
    return position if position is not None and position > min(handed) else None


@pytest.mark.parametrize("seed", range(20))
def test_matches_a_per_offset_model_under_random_hand_outs_and_acks(seed):
    """Range bookkeeping agrees with the obvious set-per-offset model."""
    rng = random.Random(seed)  # noqa: S311 - test data
    tracker = tracker_with(0)
    handed: set[int] = set()
    acked: set[int] = set()
    high = None
    position = 0
    for _ in range(200):
        if rng.random() < 0.4:
            position += rng.choice([0, 0, 0, 1, 3])  # sometimes a gap
            length = rng.randint(1, 20)
            tracker.handed_out(T, 0, position, position + length - 1)
            handed.update(range(position, position + length))
            high = position + length
            position += length
        else:
            first = rng.randint(0, position + 5)
            last = first + rng.randint(0, 15)
            expected = len((handed - acked) & set(range(first, last + 1)))
            assert tracker.ack(T, 0, first, last) == expected
            acked.update(o for o in range(first, last + 1) if o in handed)
        expected_next = _naive_next(handed, acked, high)
        assert tracker.committable().get((T, 0)) == expected_next
        assert tracker.in_flight_records() == len(handed - acked)


def test_acks_from_many_threads_all_land():
    tracker = tracker_with(0)
    tracker.handed_out(T, 0, 0, 99_999)
    ranges = [(i, i + 99) for i in range(0, 100_000, 100)]
    random.Random(1).shuffle(ranges)  # noqa: S311 - test data
    counts = []

    def worker(part):
        counts.append(sum(tracker.ack(T, 0, a, b) for a, b in part))

    threads = [threading.Thread(target=worker, args=(ranges[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sum(counts) == 100_000
    assert tracker.committable() == {(T, 0): 100_000}
