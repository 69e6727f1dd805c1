import numpy as np
import pytest

from streamtrain.errors import ForecastError
from streamtrain.forecast.evaluate import EvalSettings, rolling_origin
from streamtrain.forecast.fitcache import CachedFit, FitCache
from streamtrain.forecast.registry import fit_key, make_forecaster
from streamtrain.forecast.select import SelectForecaster, fold_bounds


class Counting:
    """Forecasts the mean of what it was fitted on plus what it was told; counts fits."""

    step_s = 60
    name = "counting"
    fits = 0

    def fit(self, history):
        if np.isnan(history).all():
            raise ForecastError("no data")
        type(self).fits += 1
        self.values = list(history)
        return self

    def update(self, points):
        self.values += list(points)
        return self

    def predict(self, horizon_steps):
        return np.full(horizon_steps, float(np.mean(self.values)))

    def predict_quantiles(self, horizon_steps, levels):
        raise ForecastError("no error model")

    def save(self, path):
        raise NotImplementedError


@pytest.fixture(autouse=True)
def _reset():
    Counting.fits = 0


def test_the_same_history_is_fitted_once_and_each_caller_gets_its_own_copy():
    cache = FitCache()
    history = np.array([1.0, 2.0, 3.0])
    first = cache.fit("m", Counting, history)
    second = cache.fit("m", Counting, history.copy())
    assert Counting.fits == 1 and (cache.hits, cache.misses) == (1, 1)
    first.update(np.array([100.0]))  # a caller's updates do not reach the cached fit
    assert second.predict(1)[0] == 2.0
    assert cache.fit("m", Counting, history).predict(1)[0] == 2.0


def test_another_history_or_key_is_another_fit_and_old_entries_are_evicted():
    cache = FitCache(max_entries=2)
    cache.fit("m", Counting, np.array([1.0, 2.0]))
    cache.fit("m", Counting, np.array([1.0, 2.5]))
    cache.fit("other", Counting, np.array([1.0, 2.5]))
    assert Counting.fits == 3
    cache.fit("m", Counting, np.array([1.0, 2.0]))  # evicted: the least recently used
    assert Counting.fits == 4


def test_a_failed_fit_raises_and_is_not_cached():
    cache = FitCache()
    with pytest.raises(ForecastError):
        cache.fit("m", Counting, np.array([np.nan]))
    with pytest.raises(ForecastError):
        cache.fit("m", Counting, np.array([np.nan]))
    assert cache.misses == 2 and cache.hits == 0


def test_daily_folds_end_at_the_history_and_fall_back_to_one_short_fold():
    assert fold_bounds(100, 40, 7, fold_steps=10) == [(60, 70), (70, 80), (80, 90), (90, 100)]
    assert fold_bounds(100, 40, 2, fold_steps=10) == [(80, 90), (90, 100)]
    assert fold_bounds(100, 8, 7, fold_steps=10) == [(92, 100)]
    assert fold_bounds(100, 40, 2) == [(60, 80), (80, 100)]


def test_a_cached_harness_scores_exactly_as_an_uncached_one():
    t = np.arange(12 * 48, dtype=np.float64)  # under two weeks: MSTL with a daily season only
    values = 100 + 50 * np.sin(2 * np.pi * t / 48) + np.random.default_rng(0).normal(0, 5, t.size)
    settings = EvalSettings(
        horizon_steps=2, test_steps=4 * 48, stride_steps=2, season_steps=48, refit_every_steps=48
    )

    def auto(cache):
        return make_forecaster(
            "auto", step_s=1800, candidates="seasonal_naive,mstl", folds=3, cache=cache
        )

    plain = rolling_origin(values, lambda: auto(None), settings)
    cache = FitCache()
    cached = rolling_origin(values, lambda: auto(cache), settings)
    assert cached.mase == plain.mase and cached.mae == plain.mae
    # four daily refits with three daily folds each: the folds overlap from day to day
    assert cache.hits > 0 and cache.misses < 4 * 2 * 4
    key = fit_key("mstl", step_s=1800)
    mstl = rolling_origin(
        values,
        lambda: CachedFit(cache, key, lambda: make_forecaster("mstl", step_s=1800)),
        settings,
    )
    direct = rolling_origin(values, lambda: make_forecaster("mstl", step_s=1800), settings)
    assert mstl.mase == direct.mase


def test_selection_with_a_cache_uses_no_step_after_an_origin():
    from tests.unit.forecast.test_select import NextIndex, _maker

    values = np.arange(3000, dtype=np.float64)
    models = {"next": lambda: NextIndex("next", 0.0)}
    cache = FitCache()
    settings = EvalSettings(
        horizon_steps=10, test_steps=500, stride_steps=10, season_steps=100, refit_every_steps=100
    )

    def factory():
        return SelectForecaster(
            _maker(models),
            ["next"],
            val_steps=400,
            horizon_steps=10,
            stride_steps=10,
            folds=4,
            fold_steps=100,
            cache=cache,
        )

    scores = rolling_origin(values, factory, settings)
    assert scores.fits == 5 and scores.mae == 0.0 and cache.hits > 0
