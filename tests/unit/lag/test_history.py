"""HWM history: interpolated lag seconds, CPS, resets, bounds and the JSON round trip."""

import json
import math

import numpy as np
import pytest

from streamtrain.errors import ConfigError, SchemaError
from streamtrain.lag.history import (
    HwmHistory,
    interpolate_lag_s,
    partition_rates,
    records_per_s,
)


def lag_s(history, committed, now_s, *, topic="t", partition=0, hwm=None):
    given = None if hwm is None else [hwm]
    out = interpolate_lag_s(history, topic, [partition], [committed], now_s, high_watermarks=given)
    return float(out[0])


@pytest.fixture
def two_points():
    history = HwmHistory()
    history.record("t", 100.0, {0: 10})
    history.record("t", 110.0, {0: 20})
    return history


@pytest.mark.parametrize(
    "committed,expected",
    [
        (10, 19.0),  # record 10 appeared when the HWM reached 11: at 101 s
        (15, 14.0),  # HWM 16 at 106 s
        (19, 10.0),  # HWM 20 at 110 s: the newest record
        (20, 0.0),  # at the HWM: caught up
        (25, 0.0),  # past the HWM (inexact HWM): still caught up, never negative
    ],
)
def test_interpolation_is_exact_on_hand_computed_points(two_points, committed, expected):
    assert lag_s(two_points, committed, 120.0) == pytest.approx(expected)


def test_a_single_record_after_a_flat_stretch_dates_from_its_arrival():
    history = HwmHistory()
    history.record("t", 0.0, {0: 5})
    history.record("t", 100.0, {0: 5})
    history.record("t", 110.0, {0: 6})
    # Record 5 arrived between 100 and 110 s; linear interpolation puts it at 110 s.
    assert lag_s(history, 5, 200.0) == pytest.approx(90.0)


def test_an_idle_caught_up_partition_is_zero_seconds_never_nan():
    history = HwmHistory(max_age_s=600.0)
    for k in range(200):  # idle for ~3 hours: far longer than the history holds
        history.record("t", 60.0 * k, {0: 42})
    assert lag_s(history, 42, 60.0 * 200) == 0.0
    # Even with no history at all, a committed offset at the current HWM is 0 s.
    assert lag_s(HwmHistory(), 42, 1e9, hwm=42) == 0.0


def test_an_offset_older_than_the_history_is_nan_not_a_guess():
    history = HwmHistory()
    history.record("t", 100.0, {0: 100})
    history.record("t", 110.0, {0: 120})
    assert math.isnan(lag_s(history, 50, 200.0))
    # The first snapshot's HWM is exactly the committed offset: still in history.
    assert lag_s(history, 100, 200.0) == pytest.approx(200.0 - 100.5)


def test_no_commit_and_unknown_partitions_are_nan():
    history = HwmHistory()
    history.record("t", 0.0, {0: 10})
    history.record("t", 10.0, {0: 20})
    out = interpolate_lag_s(history, "t", [0, 7], [-1, 5], 20.0)
    assert np.isnan(out).all()
    assert math.isnan(lag_s(history, 5, 20.0, topic="other"))


def test_records_newer_than_the_last_snapshot_use_the_current_hwm():
    history = HwmHistory()
    history.record("t", 0.0, {0: 10})
    history.record("t", 10.0, {0: 10})
    # Now (20 s) the HWM is 20: record 10 arrived when the HWM reached 11, at 11 s.
    assert lag_s(history, 10, 20.0, hwm=20) == pytest.approx(9.0)
    # Without the current HWM the newest snapshot is current: nothing to read yet.
    assert lag_s(history, 10, 20.0) == 0.0


def test_a_decreasing_hwm_resets_only_that_partition():
    history = HwmHistory()
    history.record("t", 0.0, {0: 100, 1: 50})
    history.record("t", 10.0, {0: 200, 1: 60})
    history.record("t", 20.0, {0: 5, 1: 70})  # partition 0 recreated
    assert history.snapshots("t", 0) == [(20.0, 5)]
    assert history.snapshots("t", 1) == [(0.0, 50), (10.0, 60), (20.0, 70)]
    # The pre-reset points must not be used: offset 0 is older than the new history.
    assert math.isnan(lag_s(history, 0, 30.0))
    assert lag_s(history, 50, 30.0, partition=1) == pytest.approx(30.0 - 1.0)
    history.record("t", 30.0, {0: 15, 1: 70})
    assert lag_s(history, 5, 40.0) == pytest.approx(40.0 - 21.0)


def test_partitions_may_appear_and_miss_snapshots():
    history = HwmHistory()
    history.record("t", 0.0, {0: 10})
    history.record("t", 10.0, {0: 20, 1: 100})  # partition 1 appears
    history.record("t", 20.0, {1: 110})  # partition 0 missing: carried forward
    assert history.snapshots("t", 1) == [(10.0, 100), (20.0, 110)]
    assert history.snapshots("t", 0) == [(0.0, 10), (10.0, 20), (20.0, 20)]
    assert math.isnan(lag_s(history, 99, 30.0, partition=1))  # before it was first seen
    assert lag_s(history, 100, 30.0, partition=1) == pytest.approx(30.0 - 11.0)


def test_a_topic_with_no_partitions_answers_unknown():
    history = HwmHistory()
    history.record("t", 0.0, {})
    history.record("t", 5.0, {})
    assert math.isnan(lag_s(history, 3, 10.0, hwm=9))
    assert records_per_s(history, "t").records_per_s is None


def test_the_clock_going_back_restarts_the_topic():
    history = HwmHistory()
    history.record("t", 100.0, {0: 10})
    history.record("t", 110.0, {0: 20})
    history.record("t", 50.0, {0: 21})
    assert history.snapshots("t", 0) == [(50.0, 21)]


def test_same_instant_overwrites_the_newest_snapshot():
    history = HwmHistory()
    history.record("t", 100.0, {0: 10})
    history.record("t", 100.0, {0: 12})
    assert history.snapshots("t", 0) == [(100.0, 12)]


def test_bounded_by_age_keeping_one_anchor_and_by_points():
    history = HwmHistory(max_age_s=100.0, max_points=1000)
    for k in range(31):
        history.record("t", 10.0 * k, {0: k})
    # At 300 s the cutoff is 200 s: snapshots 200..300, the 200 s one being the anchor.
    assert [t for t, _ in history.snapshots("t", 0)] == [10.0 * k for k in range(20, 31)]
    small = HwmHistory(max_age_s=1e6, max_points=5)
    for k in range(50):  # well past the buffer, to exercise its compaction
        small.record("t", float(k), {0: k})
    assert small.snapshots("t", 0) == [(float(k), k) for k in range(45, 50)]
    assert lag_s(small, 46, 50.0) == pytest.approx(50.0 - 47.0)


def test_a_partition_unseen_for_max_age_is_forgotten():
    history = HwmHistory(max_age_s=100.0)
    history.record("t", 0.0, {0: 1, 1: 1})
    history.record("t", 150.0, {0: 2})
    assert history.snapshots("t", 1) == []
    assert history.snapshots("t", 0) != []


def test_bad_input_is_a_config_error():
    with pytest.raises(ConfigError):
        HwmHistory(max_age_s=0)
    with pytest.raises(ConfigError):
        HwmHistory(max_points=1)
    history = HwmHistory()
    with pytest.raises(ConfigError):
        history.record("t", math.nan, {0: 1})
    with pytest.raises(ConfigError):
        history.record("t", 0.0, {0: -5})
    with pytest.raises(ConfigError):
        interpolate_lag_s(history, "t", [0, 1], [1], 0.0)


# -- CPS ---------------------------------------------------------------------------------


def steady(rate_by_partition, *, ticks=30, step_s=5.0):
    history = HwmHistory()
    for k in range(ticks):
        t = step_s * k
        history.record("t", t, {p: int(r * t) for p, r in rate_by_partition.items()})
    return history


def test_cps_by_differencing_hwms_per_partition_and_topic():
    rate = records_per_s(steady({0: 10.0, 1: 30.0}), "t")
    assert rate.partitions == {0: pytest.approx(10.0), 1: pytest.approx(30.0)}
    assert rate.records_per_s == pytest.approx(40.0)


def test_cps_uses_only_the_window():
    history = HwmHistory()
    hwm = 0
    for k in range(61):  # 10 rec/s for 4 min, then 50 rec/s for 1 min
        t = 5.0 * k
        if k:
            hwm += (10 if t <= 240 else 50) * 5
        history.record("t", t, {0: hwm})
    assert records_per_s(history, "t", window_s=60.0).records_per_s == pytest.approx(50.0)
    assert records_per_s(history, "t", window_s=300.0).records_per_s == pytest.approx(18.0)


def test_cps_with_few_points_uses_what_exists_and_one_point_is_none():
    history = HwmHistory()
    history.record("t", 0.0, {0: 0})
    assert records_per_s(history, "t").records_per_s is None
    assert records_per_s(history, "t").partitions == {0: None}
    history.record("t", 5.0, {0: 50})
    assert records_per_s(history, "t", window_s=60.0).records_per_s == pytest.approx(10.0)
    sparse = HwmHistory()
    sparse.record("t", 0.0, {0: 0})
    sparse.record("t", 100.0, {0: 500})  # the 60 s window holds one point: use the previous
    assert records_per_s(sparse, "t", window_s=60.0).records_per_s == pytest.approx(5.0)


def test_cps_is_robust_to_a_reset():
    history = HwmHistory()
    history.record("t", 0.0, {0: 1000})
    history.record("t", 5.0, {0: 1100})
    history.record("t", 10.0, {0: 10})  # recreated: never a negative rate
    assert math.isnan(partition_rates(history, "t", [0])[0])
    history.record("t", 15.0, {0: 60})
    assert partition_rates(history, "t", [0])[0] == pytest.approx(10.0)
    with pytest.raises(ConfigError):
        partition_rates(history, "t", [0], window_s=0.0)


# -- JSON --------------------------------------------------------------------------------


def test_json_round_trip_keeps_every_answer():
    history = steady({0: 10.0, 1: 30.0, 2: 0.5}, ticks=100)
    history.record("u", 0.0, {0: 3})
    history.record("t", 500.0, {0: 2, 1: 15000, 2: 250})  # partition 0 reset
    restored = HwmHistory.from_json(json.loads(json.dumps(history.to_json())))
    assert restored.topics == history.topics
    for p in range(3):
        assert restored.snapshots("t", p) == history.snapshots("t", p)
    committed = [0, 9000, 100]
    np.testing.assert_array_equal(
        interpolate_lag_s(restored, "t", [0, 1, 2], committed, 600.0),
        interpolate_lag_s(history, "t", [0, 1, 2], committed, 600.0),
    )
    # It keeps working after the round trip.
    restored.record("t", 505.0, {0: 52, 1: 15150, 2: 252})
    assert partition_rates(restored, "t", [0])[0] == pytest.approx(10.0)


def test_json_stride_thins_from_the_newest_snapshot():
    history = steady({0: 10.0}, ticks=10)  # snapshots at 0, 5, ..., 45 s
    thin = HwmHistory.from_json(json.loads(json.dumps(history.to_json(stride=4))))
    assert [t for t, _ in thin.snapshots("t", 0)] == [5.0, 25.0, 45.0]
    assert lag_s(thin, 100, 50.0) == pytest.approx(lag_s(history, 100, 50.0))
    with pytest.raises(ConfigError):
        history.to_json(stride=0)


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(version=99),
        lambda d: d["topics"]["t"].update(hwm_deltas="not base64!"),
        lambda d: d["topics"]["t"].update(times_s=[1.0]),
        lambda d: d["topics"]["t"].pop("partitions"),
        lambda d: d.update(max_points=1),
    ],
)
def test_malformed_json_is_a_schema_error(damage):
    history = steady({0: 1.0}, ticks=5)
    data = json.loads(json.dumps(history.to_json()))
    damage(data)
    with pytest.raises(SchemaError):
        HwmHistory.from_json(data)
