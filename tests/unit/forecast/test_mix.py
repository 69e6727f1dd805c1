import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.forecast.mix import MixWeights


def test_the_prior_until_enough_windows_then_inverse_error_weights():
    mix = MixWeights(window=3, warm=2)
    assert mix.weight(0.5) == 0.5
    for _ in range(2):
        mix.track(np.full(3, 10.0), np.full(3, 13.0))  # first errs 1, second errs 2
        mix.observe(np.array([11.0]))
        assert mix.tracking  # one step of three: not scored yet
        mix.observe(np.array([11.0, 11.0, 99.0]))  # the 99 is past the window
        assert not mix.tracking
        if mix.scored < 2:
            assert mix.weight(0.5) == 0.5
    assert mix.errors == [2.0, 4.0]
    assert mix.weight(0.5) == pytest.approx(1 / 3)  # the second errs twice as much


def test_gaps_are_skipped_and_a_window_of_gaps_is_not_scored():
    mix = MixWeights(window=2, warm=1)
    mix.track(np.array([1.0, 1.0]), np.array([5.0, 5.0]))
    mix.observe(np.array([np.nan, np.nan]))
    assert mix.scored == 0 and mix.weight(0.3) == 0.3
    mix.track(np.array([1.0, 1.0]), np.array([5.0, 5.0]))
    mix.observe(np.array([np.nan, 3.0]))
    assert mix.errors == [2.0, 2.0] and mix.weight(0.3) == 0.5


def test_both_exact_keeps_the_prior_and_one_exact_takes_all_the_weight():
    mix = MixWeights(window=1, warm=1)
    mix.track(np.array([0.0]), np.array([0.0]))
    mix.observe(np.array([0.0]))
    assert mix.weight(0.4) == 0.4
    mix.track(np.array([0.0]), np.array([2.0]))
    mix.observe(np.array([0.0]))
    assert mix.weight(0.4) == 0.0  # the first was exact: the second gets nothing


def test_state_round_trip_and_bad_settings():
    mix = MixWeights(window=1, warm=0)
    mix.track(np.array([1.0]), np.array([4.0]))
    mix.observe(np.array([2.0]))
    again = MixWeights(window=1, warm=0)
    again.restore(mix.state())
    assert again.weight(0.5) == mix.weight(0.5) == pytest.approx(1 / 3)
    with pytest.raises(ConfigError):
        MixWeights(window=0)
    with pytest.raises(ValueError, match="at least 1 steps"):
        mix.track(np.zeros(0), np.zeros(0))


def test_needed_counts_down_and_a_non_finite_forecast_is_not_tracked():
    mix = MixWeights(window=3, warm=1)
    assert mix.needed == 0
    mix.track(np.full(3, 1.0), np.full(3, 2.0))
    mix.observe(np.array([1.0]))
    assert mix.needed == 2
    mix.observe(np.array([1.0, 1.0]))
    assert mix.needed == 0 and mix.scored == 1
    mix.track(np.array([1.0, np.nan, 1.0]), np.full(3, 2.0))  # one NaN would poison the sums
    assert not mix.tracking
    mix.observe(np.full(3, 1.0))
    assert mix.scored == 1 and np.isfinite(mix.errors).all() and mix.weight(0.5) == 0.0
