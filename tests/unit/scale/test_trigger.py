"""When the fallback takes over: lag and forecast-error rules with hysteresis."""

import math

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.trigger import (
    TriggerSettings,
    TriggerState,
    relative_error,
    update_trigger,
)

S = TriggerSettings(
    lag_enter_s=600, lag_exit_s=120, error_enter=0.3, error_exit=0.15, min_active_s=300
)


def _step(state, now, lag, expected=0.0, error=None):
    return update_trigger(
        state, now_s=now, max_lag_s=lag, expected_lag_s=expected, forecast_error=error, settings=S
    )


def test_lag_above_what_the_plan_expects_enters():
    state = _step(TriggerState(), 0, lag=700)
    assert state.active and state.cause == "lag" and state.since_s == 0


def test_lag_the_plan_expected_does_not_enter():
    # 10 minutes of lag right after a 10-minute pause is what the plan said.
    assert not _step(TriggerState(), 0, lag=700, expected=600).active


def test_hysteresis_and_minimum_active_time():
    state = _step(TriggerState(), 0, lag=700)
    state = _step(state, 60, lag=300)  # below enter, above exit: stays
    assert state.active
    state = _step(state, 120, lag=60)  # calm, but only 120 s active
    assert state.active
    state = _step(state, 300, lag=60)
    assert not state.active


def test_forecast_error_enters_and_leaves():
    state = _step(TriggerState(), 0, lag=0, error=0.5)
    assert state.active and state.cause == "forecast_error"
    state = _step(state, 400, lag=0, error=0.2)  # between exit and enter: stays
    assert state.active
    assert not _step(state, 500, lag=0, error=0.1).active


def test_lag_takes_over_the_cause():
    state = _step(TriggerState(), 0, lag=0, error=0.5)
    state = _step(state, 60, lag=900, error=0.5)
    assert state.cause == "lag" and state.since_s == 0


def test_bad_settings():
    with pytest.raises(ConfigError):
        TriggerSettings(lag_enter_s=10, lag_exit_s=20)
    with pytest.raises(ConfigError):
        TriggerSettings(error_enter=0.1, error_exit=0.2)


def test_relative_error():
    assert relative_error(np.array([110.0, 90.0]), np.array([100.0, 100.0])) == 0
    assert relative_error(np.array([130.0]), np.array([100.0])) == pytest.approx(0.3)
    assert relative_error(np.array([]), np.array([])) is None
    assert relative_error(np.array([0.0]), np.array([0.0])) is None
    assert relative_error(np.array([5.0]), np.array([0.0])) == math.inf
    with pytest.raises(ConfigError):
        relative_error(np.ones(2), np.ones(3))
