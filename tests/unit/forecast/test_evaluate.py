import numpy as np
import pytest

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import SeasonalNaive
from streamtrain.forecast.evaluate import EvalSettings, mase_scale, rolling_origin, score


def test_metrics_on_a_hand_example():
    actual = np.array([0.0, 2.0, 4.0, np.nan])
    forecast = np.array([0.0, 1.0, 6.0, 100.0])
    s = score(actual, forecast, scale=2.0)
    assert s.points == 3
    assert s.mae == pytest.approx(1.0)
    assert s.mase == pytest.approx(0.5)
    assert s.rmse == pytest.approx(np.sqrt(5 / 3))
    # sMAPE: 0/0 counts 0; 2·1/3 and 2·2/10.
    assert s.smape_pct == pytest.approx(100 * (0 + 2 / 3 + 0.4) / 3)
    # MAPE over actual > 0 only.
    assert s.mape_pct == pytest.approx(100 * (0.5 + 0.5) / 2)
    assert score(np.zeros(2), np.ones(2), 1.0).mape_pct is None


def test_mase_scale_skips_gaps_and_rejects_flat_series():
    train = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    assert mase_scale(train, 1) == pytest.approx((1 + 1) / 2)
    with pytest.raises(ConfigError):
        mase_scale(np.ones(10), 2)
    with pytest.raises(ConfigError):
        mase_scale(np.arange(3.0), 3)


class _Counting:
    """A seasonal naive that counts its fits and updates, and can predict negatives."""

    name = "counting"
    step_s = 60

    def __init__(self, season, shift=0.0):
        self.inner = SeasonalNaive(season * 60)
        self.shift = shift
        self.fits = 0
        self.updated = 0

    def fit(self, history):
        self.fits += 1
        self.inner.fit(history)
        return self

    def update(self, new_points):
        self.updated += len(new_points)
        self.inner.update(new_points)
        return self

    def predict(self, horizon_steps):
        return self.inner.predict(horizon_steps) + self.shift

    def predict_quantiles(self, horizon_steps, levels):
        raise ForecastError("no error model")

    def save(self, path):
        self.inner.save(path)


def test_seasonal_naive_is_perfect_on_a_periodic_series_and_updates_between_refits():
    season = 12
    values = np.tile(np.arange(season, dtype=float), 10)
    values[:12] += 1.0  # early variation, so the MASE scale is not 0
    settings = EvalSettings(
        horizon_steps=5, test_steps=48, stride_steps=4, season_steps=season, refit_every_steps=24
    )
    made = []

    def factory():
        made.append(_Counting(season))
        return made[-1]

    scores = rolling_origin(values, factory, settings)
    assert scores.mae == 0.0
    assert scores.fits == len(made) == 2  # at the first origin and 24 steps later
    assert made[0].updated == 20  # origins at +4, +8, ..., +20 before the refit
    assert scores.points == 11 * 5


def test_forecasts_are_clipped_at_zero_and_gaps_are_not_scored():
    values = np.tile([1.0, 0.0, 1.0, 0.0], 10)
    values[:4] = 3.0  # early variation, so the MASE scale is not 0
    values[-3] = np.nan
    settings = EvalSettings(horizon_steps=4, test_steps=8, stride_steps=4, season_steps=4)
    scores = rolling_origin(values, lambda: _Counting(4, shift=-5.0), settings)
    # Clipped forecasts are all 0: errors are the actual ones (1 where it was 1).
    assert scores.points == 7
    assert scores.mae == pytest.approx(4 / 7)


def test_a_failing_model_is_named():
    class Broken(_Counting):
        def predict(self, horizon_steps):
            raise ForecastError("boom")

    values = np.random.default_rng(0).uniform(0, 10, 40)
    settings = EvalSettings(horizon_steps=2, test_steps=8, stride_steps=2, season_steps=4)
    with pytest.raises(ForecastError, match="broken failed at origin step 32: boom"):
        rolling_origin(values, lambda: Broken(4), settings, name="broken")


def test_settings_are_checked():
    with pytest.raises(ConfigError):
        EvalSettings(horizon_steps=10, test_steps=5, stride_steps=1, season_steps=1)
    with pytest.raises(ConfigError, match="before the test period"):
        rolling_origin(
            np.arange(10.0),
            lambda: _Counting(4),
            EvalSettings(horizon_steps=1, test_steps=8, stride_steps=1, season_steps=4),
        )
