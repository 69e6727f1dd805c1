import numpy as np
import pytest

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.registry import load_forecaster
from streamtrain.forecast.stats import StatsForecaster

DAY_30 = 48  # 30-minute steps per day


def _series(days, step_s=1800, seed=0, weekend=0.7):
    rng = np.random.default_rng(seed)
    per_day = 86400 // step_s
    t = np.arange(days * per_day)
    daily = 100 + 60 * np.sin(2 * np.pi * t / per_day)
    weekly = np.where((t // per_day) % 7 >= 5, weekend, 1.0)
    return daily * weekly + rng.normal(0, 2, t.shape)


@pytest.mark.parametrize("kind", ["ets", "mstl"])
def test_beats_a_flat_forecast_on_a_seasonal_series(kind):
    # (AutoETS's daily season loses to a level-only model by AICc on a weekly series)
    values = _series(21, weekend=0.7 if kind == "mstl" else 1.0)
    model = StatsForecaster(kind, step_s=1800).fit(values[:-DAY_30])
    forecast = model.predict(DAY_30)
    actual = values[-DAY_30:]
    flat = np.full(DAY_30, values[-DAY_30 - 1])
    assert forecast.shape == (DAY_30,) and np.all(forecast >= 0)
    assert np.abs(forecast - actual).mean() < 0.5 * np.abs(flat - actual).mean()


def test_mstl_takes_the_weekly_season_once_two_weeks_exist():
    assert StatsForecaster("mstl", step_s=1800).fit(_series(10)).seasons_ == (48,)
    assert StatsForecaster("mstl", step_s=1800).fit(_series(15)).seasons_ == (48, 336)
    # ETS cannot take a season of more than 24 points: it runs on hourly blocks.
    ets = StatsForecaster("ets", step_s=60)
    assert ets.f == 60 and ets.day_blocks == 24


def test_one_minute_steps_run_on_blocks_and_update_moves_the_forecast():
    values = np.repeat(_series(15), 30) + np.random.default_rng(1).normal(0, 1, 15 * 1440)
    model = StatsForecaster("mstl", step_s=60).fit(values[:-120])
    first = model.predict(30)
    model.update(values[-120:-60])
    moved = model.predict(30)
    assert model.f == 30 and first.shape == moved.shape == (30,)
    assert not np.allclose(first, moved)
    # the same as a model refitted on the same history would say, within its noise
    assert np.abs(moved - values[-60:-30]).mean() < 10


@pytest.mark.parametrize("kind", ["ets", "mstl"])
def test_a_point_forecast_is_the_same_with_or_without_the_intervals(kind):
    # the point forecast asks statsforecast for no interval; the numbers do not move
    values = np.repeat(_series(15), 30)
    alone = StatsForecaster(kind, step_s=60).fit(values[:-45])
    beside = StatsForecaster(kind, step_s=60).fit(values[:-45])
    for start, end in ((-45, -45), (-45, -20), (-20, -1)):  # origins in three blocks
        alone.update(values[start:end])
        beside.update(values[start:end])
        beside.predict_quantiles(60, [0.8])  # the interval first, then the point
        assert np.array_equal(alone.predict(60), beside.predict(60))
        assert alone._cache is not None and "sigma" not in alone._cache[1]


def test_gaps_are_filled_and_quantiles_are_ordered():
    values = _series(15)
    values[100:130] = np.nan
    values[-5:-2] = np.nan
    model = StatsForecaster("mstl", step_s=1800).fit(values)
    q = model.predict_quantiles(12, [0.1, 0.5, 0.9])
    assert np.all(q[0.1] <= q[0.5]) and np.all(q[0.5] <= q[0.9])
    assert np.any(q[0.9] > q[0.1])
    np.testing.assert_allclose(q[0.5], model.predict(12))
    with pytest.raises(ConfigError):
        model.predict_quantiles(3, [1.5])


def test_save_load_round_trip(tmp_path):
    values = _series(15)
    model = StatsForecaster("ets", step_s=1800).fit(values)
    model.save(tmp_path / "ets.json")
    again = load_forecaster(tmp_path / "ets.json")
    assert isinstance(again, StatsForecaster) and again.kind == "ets"
    np.testing.assert_allclose(again.predict(10), model.predict(10), rtol=1e-6)


def test_errors():
    with pytest.raises(ConfigError, match="unknown statistical"):
        StatsForecaster("arima")
    with pytest.raises(ConfigError):
        StatsForecaster("mstl", step_s=7)
    with pytest.raises(ForecastError, match="not fitted"):
        StatsForecaster("mstl").predict(3)
    with pytest.raises(ForecastError, match="at least"):
        StatsForecaster("mstl", step_s=1800).fit(np.ones(10))
