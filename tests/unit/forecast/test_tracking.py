import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.forecast.tracking import RecentErrors


def test_scores_the_last_origin_once_with_gaps_skipped():
    errors = RecentErrors(track_steps=3, window_steps=10, min_tracked=2)
    errors.remember(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 0.0]))
    errors.score(np.array([2.0, np.nan, 5.0, 9.0]))  # the fourth step is past track_steps
    assert errors.mae() == (1.5, 3.5)
    errors.score(np.array([100.0]))  # nothing pending: the origin was scored already
    assert errors.mae() == (1.5, 3.5)


def test_needs_min_tracked_and_keeps_only_the_window():
    errors = RecentErrors(track_steps=1, window_steps=2, min_tracked=2)
    for actual in (1.0, 2.0, 3.0):
        errors.remember(np.array([0.0]), np.array([actual]))
        errors.score(np.array([actual]))
        if actual == 1.0:
            assert errors.mae() is None
    assert errors.mae() == (2.5, 0.0)  # the last two steps only


def test_no_model_forecast_scores_nothing_and_clear_keeps_the_origin():
    errors = RecentErrors(track_steps=2, window_steps=5, min_tracked=1)
    errors.remember(None, np.array([1.0, 1.0]))
    errors.score(np.array([1.0, 1.0]))
    assert errors.mae() is None
    errors.remember(np.array([1.0, 1.0]), np.array([0.0, 0.0]))
    errors.clear()
    errors.score(np.array([2.0]))
    assert errors.mae() == (1.0, 2.0)
    errors.remember(np.array([1.0]), np.array([0.0]))
    errors.forget_origin()
    errors.score(np.array([5.0]))
    assert errors.mae() == (1.0, 2.0)


def test_rejects_non_positive_sizes():
    with pytest.raises(ConfigError):
        RecentErrors(0, 10, 1)


def test_the_mae_follows_every_scored_step_and_clear():
    errors = RecentErrors(track_steps=1, window_steps=3, min_tracked=1)
    expected: list[float] = []
    for model_value in (1.0, 4.0, 9.0, 16.0):
        errors.remember(np.array([model_value]), np.array([0.0]))
        errors.score(np.array([0.0]))
        expected = [*expected, model_value][-3:]
        assert errors.mae() == (float(np.mean(expected)), 0.0)
        assert errors.mae() == (float(np.mean(expected)), 0.0)  # asked again: the same
    errors.clear()
    assert errors.mae() is None
