"""Per-partition lag in records, the group tick, totals, max, p99 and unknowns."""

import math

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import (
    PartitionLag,
    PartitionOffsets,
    TopicOffsets,
    compute_group_lag,
    compute_topics_lag,
    lag_records,
    lag_s_from_timestamp,
)
from streamtrain.lag.status import Status, StatusTracker


@pytest.mark.parametrize(
    "committed,hwm,lwm,expected",
    [
        (90, 100, 0, 10),  # HWM - committed
        (100, 100, 0, 0),  # caught up
        (105, 100, 0, 0),  # committed past an inexact HWM: clamped, never negative
        (None, 100, 40, 60),  # no commit: HWM - low watermark
        (None, 100, None, None),  # no commit and no low watermark: unknown
        (90, None, 0, None),  # no HWM: unknown, never made up
        (10, 100, 50, 90),  # below the low watermark (retention): offset distance
    ],
)
def test_lag_records(committed, hwm, lwm, expected):
    assert lag_records(PartitionOffsets("t", 0, committed, hwm, lwm)) == expected


@pytest.mark.parametrize("field", ["partition", "committed", "high_watermark", "low_watermark"])
def test_negative_offsets_are_rejected(field):
    values = {"partition": 0, "committed": 1, "high_watermark": 2, "low_watermark": 0}
    values[field] = -1
    with pytest.raises(ConfigError):
        PartitionOffsets("t", **values)


def test_lag_s_from_timestamp_is_clamped():
    assert lag_s_from_timestamp(1000.0, 940.0) == 60.0
    assert lag_s_from_timestamp(1000.0, 1003.0) == 0.0  # producer clock ahead
    with pytest.raises(ConfigError):
        lag_s_from_timestamp(1000.0, math.inf)


def ints(*columns):
    return [np.array(c, dtype=np.int64) for c in columns]


@pytest.fixture
def history():
    h = HwmHistory()
    h.record("a", 0.0, {0: 0, 1: 0, 2: 0})
    h.record("a", 10.0, {0: 100, 1: 50, 2: 10})
    h.record("b", 0.0, {0: 0})
    h.record("b", 10.0, {0: 40})
    return h


def offsets():
    return [
        PartitionOffsets("a", 0, 50, 100, 0),  # record 50 at 5.1 s
        PartitionOffsets("b", 0, 40, 40, 0),  # caught up
        PartitionOffsets("a", 1, None, 50, 0),  # no commit: from the low watermark
        PartitionOffsets("a", 2, 5, None, 0),  # no HWM: unknown
    ]


def test_group_tick_per_partition_in_input_order(history):
    lag = compute_group_lag("g", offsets(), history, 20.0)
    assert lag.rows() == [
        ("a", 0, 50, 100, 50, pytest.approx(14.9), 10.0, Status.UNKNOWN),
        ("b", 0, 40, 40, 0, 0.0, 4.0, Status.OK),
        ("a", 1, None, 50, 50, pytest.approx(19.8), 5.0, Status.UNKNOWN),
        ("a", 2, 5, None, None, None, 1.0, Status.UNKNOWN),
    ]
    assert lag.partitions == tuple(PartitionLag(*row) for row in lag.rows())
    assert lag.partitions is lag.partitions  # built once


def test_group_tick_totals_skip_and_count_unknowns(history):
    lag = compute_group_lag("g", offsets(), history, 20.0)
    assert lag.group == "g" and lag.observed_at_s == 20.0
    assert lag.total_lag_records == 100
    assert lag.unknown_lag_records == 1
    assert lag.max_lag_s == pytest.approx(19.8)
    assert lag.p99_lag_s == pytest.approx(float(np.percentile([14.9, 0.0, 19.8], 99)))
    assert lag.unknown_lag_s == 1
    assert lag.records_per_s == pytest.approx(20.0)
    assert lag.status is Status.UNKNOWN  # no tracker: only caught-up partitions are OK
    a, b = lag.topics
    assert (a.topic, a.partition_count, a.total_lag_records, a.unknown_lag_records) == (
        "a",
        3,
        100,
        1,
    )
    assert a.max_lag_s == pytest.approx(19.8) and a.records_per_s == pytest.approx(16.0)
    assert (b.topic, b.total_lag_records, b.max_lag_s, b.status) == ("b", 0, 0.0, Status.OK)


def test_offsets_older_than_history_ask_for_timestamps_then_use_them(history):
    old = [PartitionOffsets("a", 0, 0, 100, 0)]
    h = HwmHistory()
    h.record("a", 10.0, {0: 100})
    lag = compute_group_lag("g", old, h, 20.0)
    assert lag.partitions[0].lag_s is None
    assert lag.timestamps_needed == (("a", 0, 0),)
    assert lag.unknown_lag_s == 1 and lag.max_lag_s is None and lag.p99_lag_s is None
    stamped = compute_group_lag("g", old, h, 20.0, record_timestamps_s={("a", 0, 0): 5.0})
    assert stamped.partitions[0].lag_s == 15.0
    assert stamped.timestamps_needed == ()
    # A timestamp for another offset is not used.
    other = compute_group_lag("g", old, h, 20.0, record_timestamps_s={("a", 0, 1): 5.0})
    assert other.partitions[0].lag_s is None


def test_idle_caught_up_group_is_zero_seconds_with_no_history():
    lag = compute_group_lag("g", [PartitionOffsets("t", 0, 7, 7, 0)], HwmHistory(), 1e9)
    assert lag.max_lag_s == 0.0 and lag.p99_lag_s == 0.0
    assert lag.records_per_s is None  # no history: no rate, not 0


def test_empty_group_and_bad_input():
    lag = compute_group_lag("g", [], HwmHistory(), 0.0)
    assert lag.partitions == () and lag.topics == ()
    assert lag.status is Status.UNKNOWN and lag.max_lag_s is None and lag.total_lag_records == 0
    twice = [PartitionOffsets("t", 0, 1, 2, 0), PartitionOffsets("t", 0, 1, 2, 0)]
    with pytest.raises(ConfigError):
        compute_group_lag("g", twice, HwmHistory(), 0.0)
    with pytest.raises(ConfigError):
        compute_group_lag("g", twice, HwmHistory(), 0.0, status_tracker=StatusTracker())
    with pytest.raises(ConfigError):
        compute_group_lag("g", [], HwmHistory(), math.nan)


def test_with_a_tracker_status_and_changes_come_from_it(history):
    tracker = StatusTracker()
    lag = compute_group_lag("g", offsets(), history, 20.0, status_tracker=tracker)
    assert [p.status for p in lag.partitions] == [
        Status.OK,
        Status.OK,
        Status.UNKNOWN,  # no commit: no consumer progress to judge
        Status.UNKNOWN,
    ]
    assert lag.status is Status.UNKNOWN
    assert tracker.group_status("g") is Status.UNKNOWN


def test_columnar_input_gives_the_same_tick(history):
    rows = compute_group_lag("g", offsets(), history, 20.0).rows()
    columnar = compute_topics_lag(
        "g",
        [
            TopicOffsets("a", *ints([0, 1, 2], [50, -1, 5], [100, 50, -1], [0, 0, 0])),
            TopicOffsets("b", *ints([0], [40], [40], [0])),
        ],
        history,
        20.0,
    )
    by_key = {(r[0], r[1]): r for r in rows}
    assert columnar.rows() == [
        by_key[("a", 0)],
        by_key[("a", 1)],
        by_key[("a", 2)],
        by_key[("b", 0)],
    ]
    assert columnar.total_lag_records == 100


def test_columnar_input_is_validated(history):
    with pytest.raises(ConfigError):
        TopicOffsets("a", *ints([0, 1], [1], [2, 2], [0, 0]))
    with pytest.raises(ConfigError):
        TopicOffsets("a", *ints([-1], [1], [2], [0]))
    twice = [
        TopicOffsets("a", *ints([0], [1], [2], [0])),
        TopicOffsets("a", *ints([1], [1], [2], [0])),
    ]
    with pytest.raises(ConfigError):
        compute_topics_lag("g", twice, history, 20.0)
