import numpy as np
import pytest

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import (
    Forecaster,
    SeasonalNaive,
    fill_gaps,
    seasonal_scale,
    worse_than_naive,
)


def test_fill_gaps_prefers_the_previous_season_then_interpolates():
    y = np.array([1.0, 2.0, 3.0, np.nan, 5.0, np.nan])
    np.testing.assert_array_equal(fill_gaps(y, season=3), [1, 2, 3, 1, 5, 3])
    np.testing.assert_array_equal(fill_gaps(np.array([np.nan, 2.0, 3.0, 4.0]), 2), [3, 2, 3, 4])
    np.testing.assert_array_equal(fill_gaps(np.array([1.0, np.nan, np.nan, 4.0]), 0), [1, 2, 3, 4])
    with pytest.raises(ForecastError):
        fill_gaps(np.array([np.nan, np.nan]), 1)


def test_seasonal_naive_repeats_the_last_season():
    model = SeasonalNaive(180, step_s=60)
    assert isinstance(model, Forecaster)
    model.fit(np.array([9.0, 9.0, 9.0, 1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(model.predict(7), [1, 2, 3, 1, 2, 3, 1])


def test_seasonal_naive_names_and_short_history():
    assert SeasonalNaive().name == "seasonal_naive_daily"
    assert SeasonalNaive(7 * 86_400).name == "seasonal_naive_weekly"
    model = SeasonalNaive(600, step_s=60).fit(np.array([4.0, np.nan]))
    np.testing.assert_array_equal(model.predict(3), [4, 4, 4])


def test_seasonal_naive_errors():
    with pytest.raises(ForecastError, match="not fitted"):
        SeasonalNaive().predict(1)
    with pytest.raises(ConfigError):
        SeasonalNaive(90, step_s=60)
    with pytest.raises(ConfigError):
        SeasonalNaive(120, step_s=60).fit(np.array([1.0])).predict(0)
    with pytest.raises(ForecastError, match="non-negative"):
        SeasonalNaive(120, step_s=60).fit(np.array([-1.0]))


def test_seasonal_naive_save_load_round_trip(tmp_path):
    model = SeasonalNaive(120, step_s=60).fit(np.array([1.0, 2.0, 3.0]))
    model.save(tmp_path / "m.json")
    again = SeasonalNaive.load(tmp_path / "m.json")
    np.testing.assert_array_equal(again.predict(4), model.predict(4))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ForecastError, match="cannot load"):
        SeasonalNaive.load(tmp_path / "bad.json")


def test_seasonal_naive_update_appends_and_fills_gaps_from_the_last_season():
    model = SeasonalNaive(180, step_s=60).fit(np.array([1.0, 2.0, 3.0]))
    model.update(np.array([4.0, np.nan]))
    # The window is now [3, 4, 2]: the gap took the value one season earlier (2).
    np.testing.assert_array_equal(model.predict(4), [3, 4, 2, 3])
    model.update(np.array([]))
    np.testing.assert_array_equal(model.predict(1), [3])
    with pytest.raises(ForecastError, match="not fitted"):
        SeasonalNaive(180, step_s=60).update(np.array([1.0]))
    with pytest.raises(ForecastError, match="non-negative"):
        model.update(np.array([-2.0]))


def test_worse_than_naive_needs_a_clear_margin():
    assert not worse_than_naive(1.6e-5, 0.0, 0.5)  # noise beside an exact naive
    assert not worse_than_naive(0.1878, 0.1865, 1.0)  # under 1 % apart
    assert worse_than_naive(0.2544, 0.0, 1.0)  # a real miss on a closed day
    assert worse_than_naive(1.2, 1.0, float("nan"))  # no scale: the relative margin only
    assert not worse_than_naive(1.05, 1.0, float("nan"))
    values = np.array([0.0, 1.0, np.nan, 3.0, 2.0, 5.0])
    assert seasonal_scale(values, 2) == pytest.approx(2.0)  # |3-1|, |5-3|; gaps skipped
    assert np.isnan(seasonal_scale(values[:2], 2))
