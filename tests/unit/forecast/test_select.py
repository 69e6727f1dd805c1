import numpy as np
import pytest

from streamtrain.errors import ForecastError
from streamtrain.forecast.registry import load_forecaster
from streamtrain.forecast.select import SelectForecaster


class Const:
    """Forecasts a constant; can fail at fit."""

    step_s = 60

    def __init__(self, name, value, fail=False):
        self.name, self.value, self.fail, self.seen = name, value, fail, 0

    def fit(self, history):
        if self.fail:
            raise ForecastError("cannot")
        self.seen = len(history)
        return self

    def update(self, points):
        self.seen += len(points)
        return self

    def predict(self, horizon):
        return np.full(horizon, self.value)


def _maker(models):
    return lambda name: models[name]()


def test_picks_the_candidate_with_the_lowest_validation_error():
    values = np.full(1000, 10.0)
    models = {"low": lambda: Const("low", 4.0), "close": lambda: Const("close", 9.0)}
    chooser = SelectForecaster(
        _maker(models), ["low", "close"], val_steps=200, horizon_steps=10, stride_steps=10
    )
    chooser.ensemble = False
    chooser.fit(values)
    assert chooser.chosen_ == "close"
    assert chooser.val_mae_["close"] == pytest.approx(1.0)
    # the kept model was told every step of the history, no refit needed
    assert chooser.models_["close"].seen == 1000  # type: ignore[attr-defined]
    np.testing.assert_allclose(chooser.predict(3), 9.0)


def test_the_mean_of_the_best_two_when_it_is_better():
    values = np.full(1000, 10.0)
    models = {"under": lambda: Const("under", 8.0), "over": lambda: Const("over", 12.0)}
    chooser = SelectForecaster(_maker(models), ["under", "over"], val_steps=200).fit(values)
    assert chooser.chosen_ in ("under+over", "over+under")
    np.testing.assert_allclose(chooser.predict(5), 10.0)


def test_a_failing_candidate_is_skipped_and_all_failing_is_an_error():
    values = np.full(1000, 10.0)
    models = {"bad": lambda: Const("bad", 10.0, fail=True), "ok": lambda: Const("ok", 7.0)}
    chooser = SelectForecaster(_maker(models), ["bad", "ok"], val_steps=200).fit(values)
    assert chooser.chosen_ == "ok" and "bad" not in chooser.val_mae_
    with pytest.raises(ForecastError, match="every candidate"):
        SelectForecaster(_maker(models), ["bad"], val_steps=200).fit(values)


def test_real_models_save_and_load(tmp_path):
    from streamtrain.forecast.registry import make_forecaster

    t = np.arange(15 * 48)
    values = 100 + 50 * np.sin(2 * np.pi * t / 48)
    chooser = SelectForecaster(
        lambda name: make_forecaster(name, step_s=1800),
        ["seasonal_naive", "mstl"],
        step_s=1800,
        val_steps=96,
        horizon_steps=2,
        stride_steps=2,
    ).fit(values)
    chooser.save(tmp_path / "sel.json")
    again = load_forecaster(tmp_path / "sel.json")
    assert isinstance(again, SelectForecaster) and again.chosen_ == chooser.chosen_
    np.testing.assert_allclose(again.predict(4), chooser.predict(4), rtol=1e-6)
