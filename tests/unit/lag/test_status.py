"""Burrow-style status: each rule, the slow-partition case Burrow gets wrong, JSON."""

import json

import numpy as np
import pytest

from streamtrain.errors import ConfigError, SchemaError
from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import PartitionOffsets, compute_group_lag
from streamtrain.lag.status import (
    Status,
    StatusChange,
    StatusSettings,
    StatusTracker,
    TopicObservation,
)

# Three entries at least 10 s apart: a 30 s window.
SMALL = StatusSettings(window_entries=3, min_distance_s=10.0)


def observe(committed, hwm, lag_s=None, partitions=None, topic="t"):
    """One topic's tick; None means unknown."""
    n = len(committed)
    c = np.array([-1 if v is None else v for v in committed], dtype=np.int64)
    h = np.array([-1 if v is None else v for v in hwm], dtype=np.int64)
    lag_records = np.where((c >= 0) & (h >= 0), np.maximum(h - c, 0), -1)
    waiting = np.full(n, np.nan) if lag_s is None else np.array(lag_s, dtype=np.float64)
    parts = np.arange(n) if partitions is None else np.array(partitions, dtype=np.int64)
    return TopicObservation(topic, parts, c, h, lag_records, waiting)


def run(tracker, steps, group="g"):
    """steps: (now_s, committed, hwm, lag_s) for partition 0; returns the statuses."""
    out = []
    for now_s, committed, hwm, waiting in steps:
        result = tracker.evaluate_group(group, now_s, [observe([committed], [hwm], [waiting])])
        out.append(Status(int(result.codes[0][0])))
    return out


def test_settings_are_validated_and_give_the_window():
    assert StatusSettings().window_s == 600.0  # Burrow's default: 10 commits, 60 s apart
    with pytest.raises(ConfigError):
        StatusSettings(window_entries=1)
    with pytest.raises(ConfigError):
        StatusSettings(min_distance_s=0.0)


def test_rule_5_warn_when_the_lag_never_decreases_over_a_full_window():
    tracker = StatusTracker(SMALL)
    steps = [(0.0, 100, 103, 1.0), (10.0, 110, 115, 1.0), (20.0, 120, 127, 1.0)]
    assert run(tracker, steps) == [Status.OK, Status.OK, Status.WARN]
    # The lag falls once: OK again.
    assert run(tracker, [(30.0, 130, 132, 1.0)]) == [Status.OK]


def test_rule_5_needs_a_full_window():
    tracker = StatusTracker(StatusSettings(window_entries=4, min_distance_s=10.0))
    steps = [(0.0, 100, 103, 1.0), (10.0, 110, 115, 1.0), (20.0, 120, 127, 1.0)]
    assert run(tracker, steps)[-1] is Status.OK


def test_rule_1_zero_lag_anywhere_in_the_window_is_ok():
    tracker = StatusTracker(SMALL)
    # Rising lags 0, 3, 5 with a moving offset would be WARN but for the zero.
    steps = [(0.0, 100, 100, 0.0), (10.0, 110, 113, 1.0), (20.0, 120, 125, 1.0)]
    assert run(tracker, steps) == [Status.OK] * 3
    # Once the zero leaves the window, rule 5 applies.
    assert run(tracker, [(30.0, 130, 137, 1.0)]) == [Status.WARN]


def test_rule_2_rewind_even_after_zero_lag_until_recovered():
    tracker = StatusTracker(SMALL)
    steps = [(0.0, 100, 110, 1.0), (10.0, 120, 120, 0.0), (20.0, 90, 125, 5.0)]
    assert run(tracker, steps) == [Status.OK, Status.OK, Status.REWIND]
    assert run(tracker, [(25.0, 110, 126, 5.0)]) == [Status.REWIND]  # still below 120
    assert run(tracker, [(30.0, 121, 127, 5.0)]) == [Status.OK]  # back past it


def test_rule_2_a_rewind_leaves_with_the_window():
    tracker = StatusTracker(SMALL)
    run(tracker, [(0.0, 100, 110, 1.0), (10.0, 50, 110, 1.0)])
    assert run(tracker, [(35.0, 60, 110, 1.0)]) == [Status.REWIND]
    assert run(tracker, [(45.0, 70, 110, 1.0)]) != [Status.REWIND]  # 35 s ago > 30 s window


def test_rules_3_and_4_stop_when_the_whole_group_stands_still():
    tracker = StatusTracker(SMALL)
    # Offset 100 never moves, records wait (an old record: lag_s large).
    steps = [(t, 100, 150, 500.0 + t) for t in (0.0, 10.0, 20.0, 30.0, 31.0)]
    assert run(tracker, steps) == [Status.OK] * 4 + [Status.STOP]


def test_rules_3_and_4_stall_when_the_rest_of_the_group_moves():
    tracker = StatusTracker(SMALL)
    for k, t in enumerate([0.0, 10.0, 20.0, 31.0]):
        # Partition 0 stuck at 100 with records waiting; partition 1 keeps moving.
        moving = 200 + 10 * k
        result = tracker.evaluate_group(
            "g", t, [observe([100, moving], [150, moving + 5 - k % 2], [500.0, 1.0])]
        )
    assert [Status(int(s)) for s in result.codes[0]] == [Status.STALL, Status.OK]
    assert result.status is Status.STALL
    assert tracker.partition_status("g", "t", 0) is Status.STALL


def test_slow_partition_is_not_stopped_by_a_fresh_record():
    """Burrow's false STOP (Burrow #303, PR #338) and how it is avoided here.

    A slow partition: caught up at offset 100 for an hour (its consumer commits only
    when a record arrives), then an unknown tick (a failed fetch) restarts its window,
    and the next tick sees one record that arrived 5 s ago. Burrow's rule 3 compares the
    time since the last commit (an hour) with the window's span (0 s): STOP. Here the
    consumer is blamed only for the 5 s the record has existed: OK. If the record then
    waits longer than the window, it is STOP.
    """
    tracker = StatusTracker(SMALL)
    history = HwmHistory()

    def tick(t, hwm):
        history.record("slow", t, {0: hwm})
        offsets = [PartitionOffsets("slow", 0, 100, hwm, 0)]
        return compute_group_lag("g", offsets, history, t, status_tracker=tracker)

    for second in range(0, 3600, 10):
        assert tick(float(second), 100).status is Status.OK
    tracker.evaluate_group("g", 3600.0, [observe([None], [None], topic="slow")])
    history.record("slow", 3625.0, {0: 100})
    history.record("slow", 3635.0, {0: 101})  # the record arrived at about 3635 s
    lag = tick(3640.0, 101)
    partition = lag.partitions[0]
    # What Burrow's rule 3 sees: lag > 0 in every entry of the window (one entry, 0 s
    # span) and an hour since the offset last moved.
    assert partition.lag_records == 1
    assert tracker.partition_status("g", "slow", 0) is Status.OK
    assert partition.lag_s == pytest.approx(5.0)
    assert lag.status is Status.OK
    for t in (3650.0, 3660.0, 3671.0):  # never read: waiting 36 s > the 30 s window
        lag = tick(t, 101)
    assert lag.partitions[0].lag_s == pytest.approx(36.0)
    assert lag.status is Status.STOP


def test_unknown_offsets_are_unknown_and_restart_the_window():
    tracker = StatusTracker(SMALL)
    result = tracker.evaluate_group("g", 0.0, [observe([None, 5], [10, None])])
    assert [Status(int(s)) for s in result.codes[0]] == [Status.UNKNOWN, Status.UNKNOWN]
    assert result.status is Status.UNKNOWN
    assert tracker.evaluate_group("g", 0.0, []).status is Status.UNKNOWN
    steps = [(0.0, 100, 103, 1.0), (10.0, 110, 115, 1.0)]
    run(tracker, steps, group="h")
    run(tracker, [(20.0, None, 127, None)], group="h")
    # Without the unknown tick this third entry would make the window full: WARN.
    assert run(tracker, [(30.0, 130, 139, 1.0)], group="h") == [Status.OK]


def test_a_recreated_topic_is_not_a_rewind():
    tracker = StatusTracker(SMALL)
    run(tracker, [(0.0, 500, 510, 1.0), (10.0, 505, 510, 1.0)])
    # HWM and offset both go down: the topic was recreated; start over.
    assert run(tracker, [(20.0, 0, 3, 1.0)]) == [Status.OK]


def test_observations_closer_than_min_distance_share_an_entry():
    tracker = StatusTracker(SMALL)
    statuses = run(tracker, [(float(t), 100 + 10 * t, 105 + 12 * t, 1.0) for t in range(21)])
    # Entries start at 0, 10 and 20 s: the window is full (and WARN) only at 20 s.
    assert statuses[19] is Status.OK
    assert statuses[20] is Status.WARN


def test_changes_are_reported_once_and_first_sight_only_when_not_ok():
    tracker = StatusTracker(SMALL)
    first = tracker.evaluate_group("g", 0.0, [observe([100, None], [103, 5], [1.0, None])])
    assert first.changes == ()  # OK and UNKNOWN at first sight: nothing to say
    steps = [(10.0, 110, 115), (20.0, 120, 127), (25.0, 121, 129)]
    changes: list[StatusChange] = []
    for t, c, h in steps:
        result = tracker.evaluate_group("g", t, [observe([c, None], [h, 5], [1.0, None])])
        changes += result.changes
    assert changes == [
        StatusChange("g", "t", 0, Status.OK, Status.WARN),
        StatusChange("g", None, None, Status.UNKNOWN, Status.WARN),
    ]
    fresh = StatusTracker(SMALL)
    fresh.evaluate_group("g", 0.0, [observe([None], [5])])
    stopped = fresh.evaluate_group("g2", 0.0, [observe([1], [9], [1.0])])
    assert stopped.changes == ()


def test_duplicate_partitions_are_rejected():
    with pytest.raises(ConfigError):
        StatusTracker().evaluate_group("g", 0.0, [observe([1, 2], [3, 4], partitions=[0, 0])])


def test_partitions_not_seen_for_expire_s_are_forgotten():
    tracker = StatusTracker(StatusSettings(window_entries=3, min_distance_s=10.0, expire_s=100.0))
    tracker.evaluate_group("g", 0.0, [observe([1, 1], [2, 2], [1.0, 1.0])])
    tracker.evaluate_group("g", 150.0, [observe([1], [2], [1.0])])
    assert tracker.partition_status("g", "t", 0) is Status.OK
    assert tracker.partition_status("g", "t", 1) is None


def test_json_round_trip_continues_identically():
    def ticks(start, stop):
        for k in range(start, stop):
            t = 10.0 * k
            moving = 1000 + 100 * k
            stuck_hwm = 150 + k
            yield (
                t,
                observe(
                    [100, moving, 50 if k < 6 else 20],
                    [stuck_hwm, moving + 3 * k, 60],
                    [
                        500.0 + t,
                        1.0,
                        2.0,
                    ],
                ),
            )

    original = StatusTracker(SMALL)
    for t, obs in ticks(0, 8):
        original.evaluate_group("g", t, [obs])
    restored = StatusTracker.from_json(json.loads(json.dumps(original.to_json())))
    assert restored.group_status("g") is original.group_status("g")
    seen: set[Status] = set()
    for t, obs in ticks(8, 14):
        a = original.evaluate_group("g", t, [obs])
        b = restored.evaluate_group("g", t, [obs])
        np.testing.assert_array_equal(a.codes[0], b.codes[0])
        assert a.changes == b.changes
        seen.update(Status(int(s)) for s in a.codes[0])
    assert Status.REWIND in seen or Status.STALL in seen  # the run is not trivially all OK


def test_malformed_json_is_a_schema_error():
    tracker = StatusTracker(SMALL)
    tracker.evaluate_group("g", 0.0, [observe([1], [2], [1.0])])
    data = json.loads(json.dumps(tracker.to_json()))
    with pytest.raises(SchemaError):
        StatusTracker.from_json({**data, "version": 2})
    data["blocks"][0]["n_valid"] = [1, 2]
    with pytest.raises(SchemaError):
        StatusTracker.from_json(data)
