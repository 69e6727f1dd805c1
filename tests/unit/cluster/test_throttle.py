"""AntMan's throttle on a scripted series of guarantee-job step times."""

import pytest

from streamtrain.cluster.throttle import Throttle, ThrottleAction, ThrottleSettings
from streamtrain.errors import ConfigError


def test_raises_holds_and_cuts_on_a_scripted_step_time_series():
    throttle = Throttle(
        ThrottleSettings(ceiling_workers=16, start_workers=4, step_workers=4, cooldown_rounds=1)
    )
    # No signal yet: unthrottled.
    first = throttle.observe({})
    assert (first.level_workers, first.action) == (16, ThrottleAction.HOLD)
    series = [
        ({"online": 100.0}, ThrottleAction.RAISE, 8),  # baseline 100 ms; the start is 4
        ({"online": 105.0}, ThrottleAction.RAISE, 12),  # +5 ms: noise, not interference
        ({"online": 109.9}, ThrottleAction.RAISE, 16),
        ({"online": 101.0}, ThrottleAction.HOLD, 16),  # at the ceiling
        ({"online": 111.0}, ThrottleAction.CUT, 8),  # > 100 + 10 ms: halve
        ({"online": 100.0}, ThrottleAction.HOLD, 8),  # cooling down
        ({"online": 100.0}, ThrottleAction.RAISE, 12),
        ({"online": 100.0, "other": 50.0}, ThrottleAction.RAISE, 16),
        ({"online": 100.0, "other": 75.0}, ThrottleAction.CUT, 8),  # one job interfered
    ]
    for step_times, action, level in series:
        step = throttle.observe(step_times)
        assert (step.action, step.level_workers) == (action, level), (step_times, step)
    assert "other 75 ms > 50 + 10" in step.reason


def test_a_known_baseline_counts_from_the_start():
    throttle = Throttle(ThrottleSettings(ceiling_workers=8, start_workers=8), {"online": 50.0})
    assert throttle.observe({"online": 70.0}).action is ThrottleAction.CUT


def test_bad_settings_and_input_are_refused():
    with pytest.raises(ConfigError):
        ThrottleSettings(ceiling_workers=4, start_workers=5)
    with pytest.raises(ConfigError, match="negative"):
        Throttle(ThrottleSettings(ceiling_workers=4)).observe({"x": -1.0})
