from typing import Any

import numpy as np
import pytest

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, SeasonalNaive
from streamtrain.forecast.fallback import FallbackForecaster
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.registry import (
    AUTO_TRANSFORMER,
    FORECASTER_NAMES,
    load_forecaster,
    make_forecaster,
)
from streamtrain.forecast.select import SelectForecaster
from streamtrain.forecast.stats import StatsForecaster


def test_every_name_makes_a_forecaster():
    kinds = {
        "seasonal_naive": SeasonalNaive,
        "seasonal_naive_daily": SeasonalNaive,
        "seasonal_naive_weekly": SeasonalNaive,
        "ets": StatsForecaster,
        "mstl": StatsForecaster,
        "fedformer": FedformerForecaster,
        "auto": FallbackForecaster,
    }
    assert set(FORECASTER_NAMES) == set(kinds)
    for name in FORECASTER_NAMES:
        for step_s in (60, 300, 1800, 3600):
            model = make_forecaster(name, step_s=step_s)
            assert isinstance(model, kinds[name])
            assert isinstance(model, Forecaster)
    assert make_forecaster("seasonal_naive_weekly").name == "seasonal_naive_weekly"


def test_options_reach_the_model():
    model = make_forecaster("fedformer", seed=3, train_steps=7)
    assert isinstance(model, FedformerForecaster)
    assert model.settings.train_steps == 7 and model.seed == 3
    auto = make_forecaster("auto", train_steps=9, window_steps=77, candidates="fedformer,mstl")
    assert isinstance(auto, FallbackForecaster) and isinstance(auto.main, SelectForecaster)
    assert auto.main.candidates == ("fedformer", "mstl") and auto.window_steps == 77
    fed = auto.main.make("fedformer")
    assert isinstance(fed, FedformerForecaster) and fed.settings.train_steps == 9
    # auto's candidate is the transformer alone (it ensembles with MSTL itself), the
    # registered model is not
    assert fed.settings.mstl_weight == 0.0
    registered = make_forecaster("fedformer")
    assert isinstance(registered, FedformerForecaster)
    assert registered.settings.mstl_weight == 0.5
    untrusting = make_forecaster("auto", trust_validated=False)
    assert auto.trust_validated and isinstance(untrusting, FallbackForecaster)
    assert not untrusting.trust_validated
    mixed = make_forecaster("auto", mstl_weight=0.3)
    assert isinstance(mixed, FallbackForecaster) and isinstance(mixed.main, SelectForecaster)
    made = mixed.main.make("fedformer")
    assert isinstance(made, FedformerForecaster) and made.settings.mstl_weight == 0.3
    assert isinstance(auto.main.make("mstl"), StatsForecaster)
    mstl = make_forecaster("mstl", block_s=3600)
    assert isinstance(mstl, StatsForecaster) and mstl.block_s == 3600


def test_bad_names_and_options():
    with pytest.raises(ConfigError, match=r"known: seasonal_naive, .*auto"):
        make_forecaster("prophet")
    with pytest.raises(ConfigError, match="fedformer"):
        make_forecaster("fedformer", no_such_option=1)
    with pytest.raises(ConfigError):
        make_forecaster("seasonal_naive_daily", season=3)
    with pytest.raises(ConfigError, match="ets"):
        make_forecaster("ets", nope=1)
    with pytest.raises(ConfigError, match="candidate"):
        make_forecaster("auto", candidates="crystal_ball")
    with pytest.raises(ConfigError, match="fedformer"):
        make_forecaster("auto", no_such_option=1)


def test_load_dispatches_on_the_saved_kind(tmp_path):
    naive = SeasonalNaive(120).fit(np.array([1.0, 2.0]))
    naive.save(tmp_path / "n.json")
    assert isinstance(load_forecaster(tmp_path / "n.json"), SeasonalNaive)
    (tmp_path / "x.json").write_text('{"model": "mystery"}')
    with pytest.raises(ForecastError, match="mystery"):
        load_forecaster(tmp_path / "x.json")
    with pytest.raises(ForecastError, match="cannot load"):
        load_forecaster(tmp_path / "absent.json")


def test_auto_validates_the_transformer_in_a_second_process_with_a_picklable_maker():
    import pickle

    auto: Any = make_forecaster("auto", seed=2, train_steps=7, workers=2)
    chooser = auto.main
    assert isinstance(chooser, SelectForecaster)
    assert chooser.workers == 2 and chooser.parallel == ("fedformer",)
    # what a worker process receives: our own object, pickled by this process
    made = pickle.loads(pickle.dumps(chooser.make))("fedformer")  # noqa: S301
    assert isinstance(made, FedformerForecaster)
    assert made.settings.train_steps == 7 and made.settings.mstl_weight == 0.0 and made.seed == 2
    single: Any = make_forecaster("auto", workers=1, candidates="seasonal_naive,mstl")
    single = single.main
    assert single.workers == 1 and single.parallel == ()


def test_auto_trains_its_transformer_shorter_than_the_registered_fedformer():
    own: Any = make_forecaster("fedformer")
    auto: Any = make_forecaster("auto")
    made = auto.main.make("fedformer")
    assert (own.settings.train_steps, own.settings.finetune_steps) == (400, 50)
    assert made.settings.train_steps == AUTO_TRANSFORMER["train_steps"] < 400
    assert made.settings.finetune_steps == AUTO_TRANSFORMER["finetune_steps"] < 50
    assert made.settings.finetune_learning_rate == AUTO_TRANSFORMER["finetune_learning_rate"]
    assert made.settings.mstl_weight == 0.0
    short: Any = make_forecaster("auto", train_steps=9)
    overridden = short.main.make("fedformer")
    assert overridden.settings.train_steps == 9
    assert overridden.settings.finetune_steps == AUTO_TRANSFORMER["finetune_steps"]
