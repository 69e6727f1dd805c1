import numpy as np
import pytest

from streamtrain.errors import ForecastError
from streamtrain.forecast.ets import HoltWinters


def _series(days, seed=0, step_s=600):
    rng = np.random.default_rng(seed)
    per_day = 86_400 // step_s
    t = np.arange(days * per_day)
    daily = 100 + 50 * np.sin(2 * np.pi * t / per_day)
    return daily + 0.05 * t + rng.normal(0, 2, t.size)


def test_fits_a_seasonal_series_with_trend():
    values = _series(8)
    model = HoltWinters(step_s=600).fit(values[:-144])
    forecast = model.predict(144)
    assert forecast.shape == (144,)
    naive_error = np.abs(values[-288:-144] - values[-144:]).mean()
    assert np.abs(forecast - values[-144:]).mean() < naive_error


def test_update_equals_running_the_recursion_over_more_data():
    values = _series(6, seed=1)
    fitted = HoltWinters(step_s=600).fit(values[:-10])
    stepped = HoltWinters(step_s=600).fit(values[:-10])
    stepped.update(values[-10:-4])
    stepped.update(values[-4:])
    fitted.update(values[-10:])
    np.testing.assert_allclose(stepped.predict(20), fitted.predict(20))
    assert not np.allclose(
        stepped.predict(20), HoltWinters(step_s=600).fit(values[:-10]).predict(20)
    )


def test_gaps_and_round_trip(tmp_path):
    values = _series(5, seed=2)
    values[200:260] = np.nan
    model = HoltWinters(step_s=600).fit(values)
    model.update(np.array([np.nan, 120.0]))
    assert np.all(np.isfinite(model.predict(30)))
    model.save(tmp_path / "ets.json")
    again = HoltWinters.load(tmp_path / "ets.json")
    np.testing.assert_array_equal(again.predict(30), model.predict(30))


def test_errors():
    with pytest.raises(ForecastError, match="not fitted"):
        HoltWinters().predict(3)
    with pytest.raises(ForecastError, match="at least"):
        HoltWinters(step_s=600).fit(np.ones(100))
