import sys
from typing import Any, ClassVar

import numpy as np
import pytest

from streamtrain.errors import ForecastError
from streamtrain.forecast.fitcache import FitCache
from streamtrain.forecast.folds import FoldPlan, Walk, run_plan, run_plans
from streamtrain.forecast.select import SelectForecaster


class Mean:
    """Forecasts the mean of what it saw; logs every fit and every forecast origin."""

    step_s = 60
    name = "mean"
    fits: ClassVar[list[tuple[str, int, int | None]]] = []  # (name, length, warm from)
    origins: ClassVar[list[int]] = []

    def __init__(self, name="mean"):
        self.name = name
        self.values: list[float] = []

    def fit(self, history):
        type(self).fits.append((self.name, len(history), None))
        self.values = list(history)
        self.fitted_on = len(history)
        return self

    def update(self, points):
        self.values += list(points)
        return self

    def predict(self, horizon_steps):
        type(self).origins.append(len(self.values))
        return np.full(horizon_steps, float(np.mean(self.values)))

    def predict_quantiles(self, horizon_steps, levels):
        raise ForecastError("no error model")

    def save(self, path):
        raise NotImplementedError


class WarmMean(Mean):
    """A :class:`Mean` that can continue from an earlier fit (``fit_from``)."""

    def fit_from(self, previous, history):
        type(self).fits.append((self.name, len(history), previous.fitted_on))
        self.values = list(history)
        self.fitted_on = len(history)
        return self


class Failing(Mean):
    def fit(self, history):
        raise ForecastError("cannot")


def make(name):
    return {"mean": Mean, "warm": WarmMean, "failing": Failing}[name](name)


@pytest.fixture(autouse=True)
def _reset():
    Mean.fits, Mean.origins = [], []


VALUES = np.arange(1000, dtype=np.float64)
FOLDS = ((700, 800), (800, 900), (900, 1000))


def _run(plan):  # untyped: the tests read the fake models' own attributes
    return run_plan(plan)


def _runs(plans, remote, preload=()):
    return run_plans(plans, remote, preload)


def _plan(name, **kwargs):
    return FoldPlan(name, make, VALUES, FOLDS, 10, 10, **kwargs)


def test_a_warm_model_is_trained_once_then_continued_fold_by_fold():
    result = _run(_plan("warm"))
    # no fit on the whole history: only a kept model needs one (the selection's refit)
    assert Mean.fits == [("warm", 700, None), ("warm", 800, 700), ("warm", 900, 800)]
    # each fold's forecasts come from origins inside the fold, told every step before
    assert Mean.origins == list(range(700, 1000, 10))
    assert result.forecasts is not None and result.forecasts.shape == (300,)
    assert len(result.last.values) == 1000  # the last fold's model, told every step


def test_other_models_are_fitted_anew_for_every_fold():
    _run(_plan("mean"))
    assert Mean.fits == [("mean", 700, None), ("mean", 800, None), ("mean", 900, None)]


def test_known_fits_and_walks_are_not_made_again():
    first = _run(_plan("warm", keep_fits=True))
    assert len(first.fits[900].values) == 900  # kept as fitted, before its walk
    Mean.fits, Mean.origins = [], []
    known_walks = {fold: first.walks[fold] for fold in FOLDS[:2]}
    known_fits = {900: first.fits[900]}
    again = _run(_plan("warm", known_walks=known_walks, known_fits=known_fits))
    assert Mean.fits == []  # the last fold's fit is known
    assert Mean.origins == list(range(900, 1000, 10))  # only the last fold is walked
    assert np.array_equal(again.forecasts, first.forecasts)


def test_a_failing_candidate_has_no_forecasts_and_says_why():
    result = _run(_plan("failing"))
    assert result.forecasts is None and "cannot" in result.error


def test_a_plan_run_in_a_worker_process_gives_what_it_gives_here():
    plans = [_plan("warm"), _plan("mean")]
    here = _runs(plans, remote=())
    assert len(Mean.fits) == 3 + 3
    Mean.fits = []
    away = _runs(plans, remote={"warm"})
    assert [f[0] for f in Mean.fits] == ["mean"] * 3  # warm's fits: in the other process
    for a, b in zip(here, away, strict=True):
        assert a.name == b.name and np.array_equal(a.forecasts, b.forecasts)
    assert sorted(away[0].fits) == [700, 800, 900]


def test_a_plan_that_cannot_be_sent_runs_here():
    plan = FoldPlan("mean", lambda name: Mean(name), VALUES, FOLDS, 10, 10)  # no pickle
    (result,) = _runs([plan], remote={"mean"})
    assert result.forecasts is not None and len(Mean.fits) == 3


def test_a_rolling_origin_with_a_cache_walks_only_the_new_day():
    cache = FitCache()

    def chooser():
        return SelectForecaster(
            make, ["warm", "mean"], val_steps=200, horizon_steps=10, stride_steps=10,
            folds=3, fold_steps=100, cache=cache,
        )  # fmt: skip

    day1 = chooser().fit(VALUES[:900])
    assert day1.chosen_ == "warm"  # a tie: the earlier candidate, refitted on [:900]
    Mean.fits, Mean.origins = [], []
    chooser().fit(VALUES)
    # the second day's folds are the first day's less the oldest, plus the new day:
    # one new walk per candidate, and fits only where none was made before
    assert sorted(Mean.origins) == sorted(2 * list(range(900, 1000, 10)))
    assert sorted(Mean.fits) == [("mean", 900, None), ("warm", 1000, 900)]
    assert cache.walk_hits == 2


def test_the_cache_hands_out_copies_of_fits_and_walks():
    cache: Any = FitCache()
    model = Mean().fit(VALUES[:10])
    cache.put("k", "d", model)
    model.update([1e6])
    got = cache.get("k", "d")
    assert got is not None and len(got.values) == 10
    got.update([1.0])
    assert len(cache.get("k", "d").values) == 10
    cache.put_walk("k", "d", 5, Walk(np.ones(3), model))
    walk = cache.get_walk("k", "d", 5)
    assert walk is not None and walk.model is not model and cache.walk_hits == 1
    assert cache.get_walk("k", "d", 6) is None and cache.get("k", "other") is None


def test_a_parallel_candidate_goes_to_a_process_only_to_be_trained_from_scratch():
    cache = FitCache()

    def chooser():
        return SelectForecaster(
            make, ["warm", "mean"], val_steps=200, horizon_steps=10, stride_steps=10,
            folds=3, fold_steps=100, cache=cache, workers=2, parallel=("warm",),
        )  # fmt: skip

    chooser().fit(VALUES[:900])
    # day one: nothing cached, so warm's folds ran in the worker process; it is kept
    # (a tie: the earlier candidate), so its refit is made here from its last fold's fit
    assert [f for f in Mean.fits if f[0] == "warm"] == [("warm", 900, 800)]
    Mean.fits = []
    chooser().fit(VALUES)
    # day two continues day one's cached fits: the one fine-tune is made here
    assert sorted(f for f in Mean.fits if f[0] == "warm") == [("warm", 1000, 900)]


def test_a_candidate_that_is_not_kept_is_not_fitted_on_the_whole_history():
    cache = FitCache()
    chooser = SelectForecaster(
        make, ["mean", "warm"], val_steps=200, horizon_steps=10, stride_steps=10,
        folds=3, fold_steps=100, cache=cache, workers=2, parallel=("warm",),
    )  # fmt: skip
    chooser.fit(VALUES[:900])
    assert chooser.chosen_ == "mean"  # a tie: the earlier candidate
    whole = FitCache.digest(VALUES[:900])
    assert cache.get(chooser.cache_key("mean"), whole) is not None  # the kept one's refit
    # warm was validated in its worker process but not fine-tuned on the whole history
    assert cache.get(chooser.cache_key("warm"), whole) is None
    assert cache.get(chooser.cache_key("warm"), FitCache.digest(VALUES[:800])) is not None


def test_modules_the_remote_results_need_are_imported_while_the_worker_runs(monkeypatch, caplog):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    plans = [_plan("warm"), _plan("mean")]
    here = _runs(plans, remote=(), preload=("colorsys",))
    assert "colorsys" not in sys.modules  # no worker: nothing to wait for
    away = _runs(plans, remote={"warm"}, preload=("colorsys", "no_such_module_here"))
    assert "colorsys" in sys.modules
    assert "no_such_module_here" in caplog.text  # logged, and the results are whole
    for a, b in zip(here, away, strict=True):
        assert np.array_equal(a.forecasts, b.forecasts)


def test_idle_gets_the_results_made_here_while_a_worker_runs():
    plans = [_plan("warm"), _plan("mean")]
    calls = []
    run_plans(plans, remote=(), idle=lambda here: calls.append(sorted(here)))
    assert calls == []  # no worker: nothing to wait for
    run_plans(plans, remote={"warm"}, idle=lambda here: calls.append(sorted(here)))
    assert calls == [["mean"]]


def test_the_best_preferred_candidate_is_refitted_while_the_worker_runs():
    chooser: Any = SelectForecaster(
        make, ["mean", "warm"], val_steps=200, horizon_steps=10, stride_steps=10,
        folds=3, fold_steps=100, workers=2, parallel=("warm",), prefer=("mean",),
    )  # fmt: skip
    folds = [(700, 800), (800, 900), (900, 1000)]
    here = {"mean": _run(_plan("mean"))}
    Mean.fits = []
    chooser._refit_ahead(VALUES, folds, here, {"mean": {}})
    assert Mean.fits == [("mean", 1000, None)]  # the whole history, ahead of the choice
    assert chooser._fits[("mean", 1000)].fitted_on == 1000
    chooser._refit_ahead(VALUES, folds, here, {"mean": {}})
    assert len(Mean.fits) == 1  # made once
    chooser._fits = {}
    chooser._refit_ahead(VALUES, folds, here, {"mean": {1000: Mean().fit(VALUES)}})
    assert len(Mean.fits) == 2 and chooser._fits == {}  # a cached fit is not made again
    chooser._refit_ahead(VALUES, folds, {"warm": _run(_plan("warm"))}, {})
    assert chooser._fits == {}  # only a preferred candidate
    Mean.fits = []
    chooser.fit(VALUES)
    assert chooser.chosen_ == "mean"  # a tie: the earlier candidate
    assert Mean.fits.count(("mean", 1000, None)) == 1  # the refit made ahead is the refit
