import logging

import numpy as np
import pytest

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, SeasonalNaive, naive_period_s
from streamtrain.forecast.fallback import FallbackForecaster
from streamtrain.forecast.registry import load_forecaster


class Stub:
    """A main model whose forecast is the last value plus ``bias``; can be told to fail."""

    name = "stub"
    step_s = 60

    def __init__(self, bias=0.0, fail_fit=False, fail_predict=False, nan=False):
        self.bias, self.fail_fit, self.fail_predict, self.nan = bias, fail_fit, fail_predict, nan
        self.last_ = None

    def fit(self, history):
        if self.fail_fit:
            raise ForecastError("history too short")
        self.last_ = float(history[-1])
        return self

    def update(self, new_points):
        self.last_ = float(new_points[-1])
        return self

    def predict(self, horizon_steps):
        if self.fail_predict:
            raise RuntimeError("torch broke")
        value = np.nan if self.nan else self.last_ + self.bias
        return np.full(horizon_steps, value)

    def predict_quantiles(self, horizon_steps, levels):
        return {float(q): self.predict(horizon_steps) for q in levels}

    def save(self, path):
        raise ForecastError("stubs do not save")


DAY = 1440


def _flat(days, value=100.0):
    return np.full(days * DAY, value)


def test_uses_the_main_model_when_it_is_fine():
    model = FallbackForecaster(Stub(bias=1.0)).fit(_flat(2))
    np.testing.assert_array_equal(model.predict(3), [101, 101, 101])
    assert model.source_ == "stub" and model.reason_ is None


def test_falls_back_when_the_main_model_cannot_fit(caplog):
    with caplog.at_level(logging.WARNING):
        model = FallbackForecaster(Stub(fail_fit=True)).fit(_flat(2, 7.0))
        forecast = model.predict(4)
    np.testing.assert_array_equal(forecast, [7, 7, 7, 7])
    assert model.source_ == "seasonal_naive_daily"
    assert model.reason_ is not None
    assert "not fitted" in model.reason_ and "history too short" in model.reason_
    assert "falling back" in caplog.text


@pytest.mark.parametrize("stub", [Stub(fail_predict=True), Stub(nan=True)])
def test_falls_back_when_the_main_model_fails_to_predict(stub):
    model = FallbackForecaster(stub).fit(_flat(2, 5.0))
    np.testing.assert_array_equal(model.predict(2), [5, 5])
    assert model.reason_ is not None and "failed" in model.reason_


def test_falls_back_while_recent_error_exceeds_the_naive_and_returns_after():
    history = np.tile(np.arange(DAY, dtype=float), 14)  # two weeks of a daily ramp
    stub = Stub(bias=50.0)
    model = FallbackForecaster(stub, track_steps=10, window_steps=60, min_tracked=30)
    model.fit(history)
    assert model.fallback_ is not None
    assert model.fallback_.name == "seasonal_naive_weekly"
    np.testing.assert_array_equal(model.predict(1), [DAY - 1 + 50])  # not enough evidence yet
    for start in range(0, 60, 10):
        model.update(np.arange(start, start + 10, dtype=float))
    # The naive is exact on this series; the stub is 50 off (and lags the ramp).
    recent = model.recent_mae()
    assert recent is not None and recent[1] == 0.0
    np.testing.assert_array_equal(model.predict(3), [60, 61, 62])
    assert model.source_ == "seasonal_naive_weekly"
    assert model.reason_ is not None and "recent MAE" in model.reason_
    stub.bias = 1.0  # now the stub is right one step ahead
    for start in range(60, 200, 10):
        model.update(np.arange(start, start + 10, dtype=float))
    model.track_steps = 1  # only score the step the stub gets right
    for start in range(200, 300):
        model.update(np.array([float(start)]))
    recent = model.recent_mae()
    assert recent is not None and recent[0] <= recent[1]
    assert model.predict(1)[0] == pytest.approx(300.0)
    assert model.source_ == "stub"


def test_not_fitted_and_round_trip(tmp_path):
    with pytest.raises(ForecastError, match="not fitted"):
        FallbackForecaster(Stub()).predict(1)
    model = FallbackForecaster(Stub(fail_fit=True)).fit(_flat(2, 3.0))
    model.save(tmp_path / "auto.json")
    again = load_forecaster(tmp_path / "auto.json")
    assert isinstance(again, FallbackForecaster)
    np.testing.assert_array_equal(again.predict(5), model.predict(5))
    assert again.source_ == "seasonal_naive_daily"
    assert isinstance(again.fallback_, SeasonalNaive)


def test_quantiles_from_the_fallback_are_the_point_forecast():
    model = FallbackForecaster(Stub(fail_fit=True)).fit(_flat(2, 3.0))
    bands = model.predict_quantiles(2, [0.1, 0.9])
    np.testing.assert_array_equal(bands[0.1], [3, 3])
    np.testing.assert_array_equal(bands[0.9], [3, 3])


def test_a_tiny_miss_beside_an_exact_naive_does_not_hand_over():
    # A closed day: the naive repeats yesterday's zeros exactly; the main model is 1e-5
    # off. That is noise next to the series' daily swing, not a broken model.
    day = np.zeros(DAY)
    day[480:1080] = 10.0  # open 8:00-18:00
    history = np.tile(day, 8)
    history[-DAY:] = 0.0  # yesterday was closed
    stub = Stub(bias=1e-5)
    model = FallbackForecaster(stub, track_steps=10, window_steps=60, min_tracked=30)
    model.fit(history)
    for _ in range(6):
        model.update(np.zeros(10))
    recent = model.recent_mae()
    assert recent is not None and recent[1] == 0.0 and recent[0] > recent[1]
    model.predict(1)
    assert model.source_ == "stub" and model.reason_ is None


class Validated(Stub):
    """A main model that says it is trusted (auto's validated statsforecast choice)."""

    trusted_ = True


@pytest.mark.parametrize("trust", [True, False])
def test_a_trusted_main_model_is_not_handed_over_on_recent_error(trust):
    history = np.tile(np.arange(DAY, dtype=float), 14)
    model = FallbackForecaster(
        Validated(bias=50.0), track_steps=10, window_steps=60, min_tracked=30, trust_validated=trust
    )
    model.fit(history)
    for start in range(0, 60, 10):
        model.update(np.arange(start, start + 10, dtype=float))
    recent = model.recent_mae()
    assert recent is not None and recent[0] > recent[1] + 40  # clearly worse than the naive
    forecast = model.predict(2)
    assert model.trusted_ is trust
    if trust:
        assert model.source_ == "stub"
        np.testing.assert_array_equal(forecast, [59 + 50, 59 + 50])
    else:
        assert model.source_ == "seasonal_naive_weekly"
        np.testing.assert_array_equal(forecast, [60, 61])


def test_a_trusted_main_model_still_falls_back_when_it_fails():
    model = FallbackForecaster(Validated(fail_predict=True)).fit(_flat(2, 5.0))
    np.testing.assert_array_equal(model.predict(2), [5, 5])
    assert model.reason_ is not None and "failed" in model.reason_


@pytest.mark.parametrize("days", [1, 8, 14])
def test_the_safety_net_the_naive_model_and_the_policies_repeat_one_season(days):
    """One rule (naive_period_s) picks the naive's season: the week from two weeks on."""
    from streamtrain.scale.policies.feed import forecaster_factory

    history = np.tile(np.arange(DAY, dtype=float), days)
    steps = history.shape[0]
    expected = naive_period_s(steps, 60)
    assert expected == (7 * 86_400 if days >= 14 else 86_400)
    net = FallbackForecaster(Stub()).fit(history)
    assert net.fallback_ is not None and net.fallback_.period_s == expected
    assert SeasonalNaive(0).fit(history).period_s == expected
    policy_naive = forecaster_factory("seasonal_naive")(steps)
    assert isinstance(policy_naive, SeasonalNaive) and policy_naive.period_s == expected
    assert naive_period_s(14 * DAY - 1, 60) == 86_400


def test_quantile_levels_are_checked_whichever_model_answers():
    model = FallbackForecaster(Stub()).fit(_flat(2, 3.0))
    assert isinstance(model, Forecaster) and isinstance(Stub(), Forecaster)
    for levels in ([1.5], [0.0], [float("nan")]):
        with pytest.raises(ConfigError, match="quantile levels"):
            model.predict_quantiles(2, levels)
    assert set(model.predict_quantiles(2, [0.1, 0.9])) == {0.1, 0.9}


def test_a_model_without_quantiles_is_not_a_forecaster():
    class PointOnly:
        name, step_s = "point", 60

        def fit(self, history):
            return self

        def predict(self, horizon_steps):
            return np.zeros(horizon_steps)

        def update(self, new_points):
            return self

        def save(self, path):
            pass

    assert not isinstance(PointOnly(), Forecaster)


class Counting(Stub):
    """A stub that counts its point forecasts."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.predictions = 0

    def predict(self, horizon_steps):
        self.predictions += 1
        return super().predict(horizon_steps)


def test_a_forecast_asked_again_from_the_same_state_is_not_remade():
    stub = Counting(bias=1.0)
    model = FallbackForecaster(stub, track_steps=5).fit(_flat(2))
    made = stub.predictions
    first = model.predict(3)
    first[:] = -1.0  # the caller's copy: the next answer is not changed by it
    np.testing.assert_array_equal(model.predict(3), [101, 101, 101])
    assert model.predict_quantiles(3, [0.5])[0.5].tolist() == [101, 101, 101]
    assert stub.predictions == made + 2  # the forecast once, the quantiles' own once
    np.testing.assert_array_equal(model.predict(4), [101] * 4)  # another horizon: made
    assert stub.predictions == made + 3
    model.update(np.array([200.0]))  # a new state: made again
    np.testing.assert_array_equal(model.predict(4), [201] * 4)
    model.fit(_flat(2, 50.0))
    np.testing.assert_array_equal(model.predict(4), [51] * 4)
