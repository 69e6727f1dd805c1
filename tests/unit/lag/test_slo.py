"""SLO thresholds on lag seconds with hysteresis: transitions only, no flapping."""

import json

import pytest

from streamtrain.errors import ConfigError, SchemaError
from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import PartitionOffsets, compute_group_lag
from streamtrain.lag.slo import SloSettings, SloState, SloTracker, SloTransition

KEY = ("g", None, None)


def feed(tracker, lags, key=KEY):
    return [
        (t.previous, t.current)
        for i, lag in enumerate(lags)
        if (t := tracker.update(key, lag, float(i))) is not None
    ]


def test_default_is_kale_twenty_minutes_strictly_above():
    tracker = SloTracker()
    assert tracker.settings.violation_s == 1200.0
    assert feed(tracker, [1200.0]) == []  # "over 20 minutes" is a violation; 20 min is not
    assert feed(tracker, [1200.5]) == [(SloState.OK, SloState.VIOLATION)]


def test_hysteresis_suppresses_flapping():
    tracker = SloTracker()
    hovering = [1190.0, 1210.0, 1195.0, 1205.0, 1100.0, 1250.0, 970.0, 1199.0]
    assert feed(tracker, hovering) == [(SloState.OK, SloState.VIOLATION)]
    assert tracker.state(KEY) is SloState.VIOLATION
    # Cleared only below 0.8 x 1200 = 960 s; then re-entered only above 1200 s.
    assert feed(tracker, [959.0, 1100.0, 1199.0, 1201.0]) == [
        (SloState.VIOLATION, SloState.OK),
        (SloState.OK, SloState.VIOLATION),
    ]


def test_without_hysteresis_it_would_flap():
    tracker = SloTracker(SloSettings(clear_ratio=1.0))
    assert len(feed(tracker, [1190.0, 1210.0, 1195.0, 1205.0])) == 3


def test_warning_level_and_stepping_down_through_it():
    tracker = SloTracker(SloSettings(violation_s=1200.0, warning_s=600.0))
    assert feed(tracker, [100.0, 700.0, 1300.0, 1000.0, 900.0, 500.0, 470.0]) == [
        (SloState.OK, SloState.WARNING),
        (SloState.WARNING, SloState.VIOLATION),
        (SloState.VIOLATION, SloState.WARNING),  # below 960 but above 480 (0.8 x 600)
        (SloState.WARNING, SloState.OK),
    ]


def test_unknown_lag_keeps_the_state_and_bad_lag_is_rejected():
    tracker = SloTracker()
    feed(tracker, [2000.0])
    assert tracker.update(KEY, None, 5.0) is None
    assert tracker.state(KEY) is SloState.VIOLATION
    with pytest.raises(ConfigError):
        tracker.update(KEY, float("nan"), 6.0)
    tracker.forget(KEY)
    assert tracker.state(KEY) is SloState.OK


def test_transition_carries_key_lag_and_time():
    tracker = SloTracker()
    key = ("g", "t", 3)
    assert tracker.update(key, 1500.0, 42.0) == SloTransition(
        key, SloState.OK, SloState.VIOLATION, 1500.0, 42.0
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"violation_s": 0.0}, {"warning_s": 1300.0}, {"warning_s": 0.0}, {"clear_ratio": 0.0}],
)
def test_settings_are_validated(kwargs):
    with pytest.raises(ConfigError):
        SloSettings(**kwargs)


def test_update_group_uses_max_lag_and_optionally_partitions():
    history = HwmHistory()
    history.record("t", 0.0, {0: 0, 1: 0})
    history.record("t", 10.0, {0: 100, 1: 100})
    offsets = [PartitionOffsets("t", 0, 0, 100, 0), PartitionOffsets("t", 1, 100, 100, 0)]
    lag = compute_group_lag("g", offsets, history, 2000.0)
    tracker = SloTracker()
    assert [(t.key, t.current) for t in tracker.update_group(lag)] == [
        (("g", None, None), SloState.VIOLATION)
    ]
    moved = tracker.update_group(lag, per_partition=True)
    assert [(t.key, t.current) for t in moved] == [(("g", "t", 0), SloState.VIOLATION)]


def test_json_round_trip():
    tracker = SloTracker(SloSettings(violation_s=100.0, warning_s=50.0, clear_ratio=0.5))
    tracker.update(("g", None, None), 150.0, 0.0)
    tracker.update(("g", "t", 1), 60.0, 0.0)
    restored = SloTracker.from_json(json.loads(json.dumps(tracker.to_json())))
    assert restored.settings == tracker.settings
    assert restored.state(("g", None, None)) is SloState.VIOLATION
    assert restored.state(("g", "t", 1)) is SloState.WARNING
    assert restored.update(("g", None, None), 60.0, 1.0) is None  # hysteresis survives
    with pytest.raises(SchemaError):
        SloTracker.from_json({"version": 1, "settings": {}, "states": []})
    with pytest.raises(SchemaError):
        SloTracker.from_json({**tracker.to_json(), "version": 7})
