"""The overflow buffer: oldest records first, cut to fit a frame, in-flight accounting,
and a ShuffleUnit that trains locally what no frame can carry."""

import math

import numpy as np
import pytest

from streamtrain.records import RecordColumns
from streamtrain.shuffle.overflow import (
    FRAME_BYTES_PER_RECORD,
    FRAME_HEADER_BYTES,
    Overflow,
    frame_bytes,
)
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.unit import ShuffleUnit
from streamtrain.testing import RecordingAcknowledger, records


def offsets(columns: RecordColumns) -> list[int]:
    return [int(o) for o in columns.offsets]


def popped(overflow: Overflow, max_records: int, limit: float = math.inf) -> RecordColumns:
    part = overflow.pop_for_frame(max_records, limit)
    assert part is not None
    return part


def test_oldest_first_and_a_returned_batch_in_front():
    overflow = Overflow(capacity_records=100)
    overflow.push(records(0, 10))
    overflow.push(records(10, 10))
    first = popped(overflow, 15)
    assert offsets(first) == list(range(10))  # one chunk at a time, never merged
    assert (overflow.records, overflow.in_flight_records) == (10, 10)
    overflow.landed(first)
    overflow.push(first, front=True)  # rejected by its receiver: re-routed first
    assert offsets(popped(overflow, 100)) == list(range(10))
    assert offsets(popped(overflow, 100)) == list(range(10, 20))
    assert not overflow and overflow.records == 0 and overflow.in_flight_records == 20


def test_a_batch_is_cut_to_fit_the_frame_and_an_oversized_record_is_refused():
    overflow = Overflow(capacity_records=100)
    overflow.push(records(0, 10, payload=b"x" * 1_000))
    limit = frame_bytes(4, 4_000)  # exactly four such records
    part = popped(overflow, 10, limit)
    assert offsets(part) == [0, 1, 2, 3]
    assert frame_bytes(len(part), part.payload_bytes) <= limit
    assert overflow.pop_for_frame(10, limit - 1) is not None  # three fit under it
    tiny = FRAME_HEADER_BYTES + FRAME_BYTES_PER_RECORD + 999  # below one record's frame
    assert overflow.pop_for_frame(10, tiny) is None
    kept = overflow.take_head(1)
    assert offsets(kept) == [7]
    assert overflow.records == 2 and overflow.in_flight_records == 7


def test_room_and_drop_of_revoked_partitions():
    overflow = Overflow(capacity_records=30)
    overflow.push(records(0, 10, partition=0))
    overflow.push(records(0, 15, partition=1))
    assert overflow.room == 5
    overflow.push(records(10, 10, partition=0), front=True)  # may exceed the capacity
    assert overflow.room == 0
    assert overflow.drop("t", {0}) == 20
    assert overflow.drop("other", {1}) == 0
    assert (overflow.records, overflow.room) == (15, 15)
    assert offsets(overflow.take_head(100)) == list(range(15))


@pytest.mark.parametrize("seed", range(50))
def test_every_record_leaves_once_in_order_and_every_frame_fits(seed):
    rng = np.random.default_rng(seed)
    sizes = [int(n) for n in rng.integers(1, 401, size=int(rng.integers(1, 31)))]
    max_records = int(rng.integers(1, 41))
    limit = int(rng.integers(FRAME_HEADER_BYTES + FRAME_BYTES_PER_RECORD + 1, 20_001))
    columns = RecordColumns.from_values(
        "t", [0] * len(sizes), list(range(len(sizes))), [0] * len(sizes), [b"p" * n for n in sizes]
    )
    overflow = Overflow(capacity_records=len(sizes))
    overflow.push(columns)
    out: list[int] = []
    while overflow:
        part = overflow.pop_for_frame(max_records, limit)
        if part is None:
            part = overflow.take_head(1)
            assert frame_bytes(1, part.payload_bytes) > limit
        else:
            assert len(part) <= max_records
            assert frame_bytes(len(part), part.payload_bytes) <= limit
        out += offsets(part)
    assert out == list(range(len(sizes)))
    assert overflow.records == 0


def test_the_unit_trains_locally_a_record_no_frame_can_carry():
    settings = ShuffleSettings(
        job="j",
        worker_id="w",
        policy=ShufflePolicy.ADVANCED,
        queue_capacity_records=2,
        low_watermark_records=1,
        high_watermark_records=2,
        overflow_capacity_records=10,
    )
    unit = ShuffleUnit(settings, RecordingAcknowledger())
    unit.put(records(0, 2))  # fills the queue
    unit.put(records(2, 3, payload=b"y" * 5_000))  # overflow
    forwarded = unit.pop_overflow(10, frame_bytes(1, 5_000) - 1)
    assert forwarded is None  # none of them fits: all three stay here
    stats = unit.stats()
    assert (stats.oversized_records_kept, stats.overflow_records, stats.queue_records) == (3, 0, 5)
    assert stats.in_flight_records == 0
