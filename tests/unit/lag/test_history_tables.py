"""The control app's persisted history over plain dicts: written, pruned, read back."""

import json
import logging

from streamtrain.lag.history_tables import (
    HistoryTables,
    arrival_message,
    hwm_message,
    lag_message,
)
from streamtrain.lag.monitor import GroupPoint, HwmPoint

STEP_S = 10.0
NOW = 1_700_000_000.0


def tables(**kwargs):
    defaults = {"step_s": STEP_S, "max_age_s": 100.0}
    return HistoryTables({}, {}, {}, **(defaults | kwargs))


def group_point(group="trainer", at_s=NOW, lag=5):
    return GroupPoint(group, at_s, lag, 1.5, 2.0, 30.0, "OK")


def test_messages_carry_the_kind_the_name_and_the_step():
    key, value = hwm_message(HwmPoint("events", NOW + 3, (10, -1)), STEP_S)
    assert key == f"hwm:events|{int(NOW // STEP_S)}"
    assert json.loads(value) == {"topic": "events", "at_s": NOW + 3, "hwms": [10, -1]}
    key, value = lag_message(group_point(), STEP_S)
    assert key == f"lag:trainer|{int(NOW // STEP_S)}"
    assert json.loads(value)["total_lag_records"] == 5
    assert arrival_message("trainer", 42, 12.5) == ("arr:trainer|42", "12.5")


def test_kept_steps_are_read_back_after_a_restart():
    first = tables()
    first.keep(*hwm_message(HwmPoint("events", NOW, (10, 20)), STEP_S), NOW)
    first.keep(*lag_message(group_point(), STEP_S), NOW)
    step = int(NOW // STEP_S)
    assert first.group_history == {
        "trainer": {step: json.loads(lag_message(group_point(), STEP_S)[1])}
    }
    second = HistoryTables(first.hwm, first.lag, first.arrivals, step_s=STEP_S, max_age_s=100.0)
    assert second.hwm_points() == [HwmPoint("events", NOW, (10, 20))]
    second.restore_group_history()
    assert second.group_history == first.group_history


def test_steps_past_the_maximum_age_are_pruned():
    t = tables()
    t.keep(*lag_message(group_point(at_s=NOW - 120), STEP_S), NOW - 120)
    t.keep(*lag_message(group_point(at_s=NOW - 50), STEP_S), NOW - 50)
    assert len(t.lag) == 2 and len(t.group_history["trainer"]) == 2
    t.keep(*lag_message(group_point(at_s=NOW), STEP_S), NOW)
    assert sorted(t.group_history["trainer"]) == [int((NOW - 50) // STEP_S), int(NOW // STEP_S)]
    assert len(t.lag) == 2


def test_arrival_steps_keep_the_newest_of_the_planners_group():
    t = tables(planner_group="trainer", max_arrival_steps=3)
    for step in range(10):
        t.keep(*arrival_message("trainer", step, float(step)), NOW)
    t.keep(*arrival_message("other", 0, 1.0), NOW)  # stored, never pruned: not planned
    assert t.arrival_steps("trainer") == {7: 7.0, 8: 8.0, 9: 9.0}
    assert t.arrival_steps("other") == {0: 1.0}


def test_malformed_entries_are_logged_and_skipped(caplog):
    t = tables(planner_group="trainer", max_arrival_steps=3)
    with caplog.at_level(logging.WARNING):
        t.keep("nonsense", "{}", NOW)
        t.keep("lag:trainer|x", "{}", NOW)
        t.keep(f"lag:trainer|{int(NOW // STEP_S)}", "not json", NOW)
        t.hwm["events|oops"] = "[]"
        t.keep(*hwm_message(HwmPoint("events", NOW, (1,)), STEP_S), NOW)
        t.lag["trainer|nope"] = "{}"
        t.restore_group_history()
        t.arrivals["trainer|5"] = "fast"
        t.arrivals["trainer"] = "1.0"
        t.keep(*arrival_message("trainer", 6, 2.0), NOW)
        steps = t.arrival_steps("trainer")
        points = t.hwm_points()
    assert steps == {6: 2.0}
    assert points == [HwmPoint("events", NOW, (1,))]  # the malformed value is skipped
    assert "events|oops" in t.hwm  # a malformed key is kept, not pruned by accident
    assert t.group_history == {}  # the malformed lag value did not reach the pages
    for text in ("nonsense", "lag:trainer|x", "entry 'trainer|", "trainer|nope", "trainer|5"):
        assert text in caplog.text
