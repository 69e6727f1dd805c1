import copy
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import SeasonalNaive
from streamtrain.forecast.evaluate import EvalSettings, rolling_origin
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.fedformer_settings import FedformerSettings, NetConfig
from streamtrain.forecast.registry import load_forecaster
from streamtrain.forecast.stats import StatsForecaster
from tests.unit.forecast._series_helpers import seasonal_with_trend

TINY = FedformerSettings(
    NetConfig(seq_len=36, label_len=12, pred_len=6, d_model=8, n_heads=2, d_ff=16),
    train_steps=20,
    batch_size=8,
    val_every=10,
)


def _tiny(seed=0):
    return FedformerForecaster(TINY, seed=seed)


@pytest.fixture(scope="module")
def history():
    return seasonal_with_trend(4, seed=1)


@pytest.fixture(scope="module")
def fitted(history):
    return _tiny().fit(history)


def test_shape_non_negative_and_deterministic(history, fitted):
    forecast = fitted.predict(90)
    assert forecast.shape == (90,)
    assert np.all(forecast >= 0) and np.all(np.isfinite(forecast))
    np.testing.assert_array_equal(_tiny().fit(history).predict(90), forecast)
    assert not np.array_equal(_tiny(seed=1).fit(history).predict(90), forecast)


def test_update_extends_the_window_without_retraining(history):
    model = _tiny().fit(history[:-60])
    weights = [p.detach().clone() for p in model.net_.parameters()]
    before = model.predict(30)
    model.update(history[-60:])
    in_pieces = _tiny().fit(history[:-60]).update(history[-60:-25]).update(history[-25:])
    np.testing.assert_allclose(model.predict(30), in_pieces.predict(30))
    assert not np.allclose(model.predict(30), before)
    for old, new in zip(weights, model.net_.parameters(), strict=True):
        assert (old == new).all()


def test_gaps_are_handled(history):
    gappy = history.copy()
    gappy[1000:1300] = np.nan  # a five-hour outage
    gappy[::97] = np.nan  # scattered missing minutes
    model = _tiny().fit(gappy)
    model.update(np.array([np.nan] * 20 + [900.0]))
    assert np.all(np.isfinite(model.predict(60)))


def test_quantiles_are_ordered(fitted):
    bands = fitted.predict_quantiles(60, [0.1, 0.5, 0.9])
    assert set(bands) == {0.1, 0.5, 0.9}
    assert np.all(bands[0.1] <= bands[0.5]) and np.all(bands[0.5] <= bands[0.9])
    assert np.any(bands[0.1] < bands[0.9])
    with pytest.raises(ConfigError):
        fitted.predict_quantiles(5, [1.5])


def test_save_load_round_trip(tmp_path, fitted):
    fitted.save(tmp_path / "model.npz")
    again = load_forecaster(tmp_path / "model.npz")
    assert isinstance(again, FedformerForecaster)
    np.testing.assert_allclose(again.predict(45), fitted.predict(45), rtol=1e-6)
    again.update(np.array([500.0]))
    fitted_copy = FedformerForecaster.load(tmp_path / "model.npz").update(np.array([500.0]))
    np.testing.assert_allclose(again.predict(10), fitted_copy.predict(10))
    (tmp_path / "bad.npz").write_bytes(b"not a model")
    with pytest.raises(ForecastError, match="cannot load"):
        FedformerForecaster.load(tmp_path / "bad.npz")


def test_errors(history):
    with pytest.raises(ForecastError, match="not fitted"):
        _tiny().predict(5)
    with pytest.raises(ForecastError, match="at least"):
        _tiny().fit(history[:1000])
    with pytest.raises(ConfigError):
        FedformerForecaster(TINY, step_s=7)
    with pytest.raises(ConfigError):
        FedformerSettings(NetConfig(label_len=0))


def test_importing_the_registry_does_not_import_torch():
    code = (
        "import sys, streamtrain.forecast, streamtrain.commands.forecast; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_beats_both_seasonal_naives_on_a_held_out_week_with_trend():
    """Three weeks to train on, the fourth held out; 30-minute horizon, fitted once."""
    values = seasonal_with_trend(28, seed=3)
    settings = EvalSettings(
        horizon_steps=30, test_steps=7 * 1440, stride_steps=60, season_steps=1440
    )
    small = FedformerSettings(train_steps=150)
    fed = rolling_origin(values, lambda: FedformerForecaster(small, seed=0), settings)
    daily = rolling_origin(values, lambda: SeasonalNaive(86_400), settings)
    weekly = rolling_origin(values, lambda: SeasonalNaive(7 * 86_400), settings)
    assert fed.mase < daily.mase
    assert fed.mase < weekly.mase


def test_the_forecast_is_the_weighted_mean_of_the_transformer_and_mstl(history, fitted):
    alone = FedformerForecaster(dataclasses.replace(TINY, mstl_weight=0.0)).fit(history)
    mstl = StatsForecaster("mstl").fit(history)
    assert alone.mstl_ is None and fitted.mstl_ is not None
    expected = 0.5 * alone.predict(45) + 0.5 * mstl.predict(45)
    np.testing.assert_allclose(fitted.predict(45), expected, rtol=1e-9)
    assert not np.allclose(alone.predict(45), mstl.predict(45))  # the mix is neither
    bands = fitted.predict_quantiles(45, [0.1, 0.9])
    theirs = mstl.predict_quantiles(45, [0.1, 0.9])
    own = alone.predict_quantiles(45, [0.1, 0.9])
    for q in (0.1, 0.9):
        np.testing.assert_allclose(bands[q], 0.5 * own[q] + 0.5 * theirs[q], rtol=1e-9)
    step = np.array([history[-1440]])
    np.testing.assert_allclose(
        _tiny().fit(history).update(step).predict(10),
        0.5 * alone.update(step).predict(10) + 0.5 * mstl.update(step).predict(10),
        rtol=1e-9,
    )


def test_the_share_follows_the_errors_since_the_fit_and_survives_a_reload(tmp_path, history):
    model = _tiny().fit(history)
    assert model.mstl_share == 0.5 and model.mix_.tracking
    window = model.mix_.window
    for day_step in range(0, 6 * window, window):  # six windows of yesterday's values
        model.update(history[-1440 + day_step : -1440 + day_step + window])
    assert model.mix_.scored == 6
    first, second = model.mix_.errors
    assert model.mstl_share == pytest.approx(first / (first + second))
    assert model.mstl_share != 0.5
    fixed = FedformerForecaster(dataclasses.replace(TINY, adapt_weight=False)).fit(history)
    assert fixed.mstl_share == 0.5 and not fixed.mix_.tracking
    model.save(tmp_path / "mixed.npz")
    again = FedformerForecaster.load(tmp_path / "mixed.npz")
    assert again.mstl_share == pytest.approx(model.mstl_share)
    np.testing.assert_allclose(again.predict(20), model.predict(20), rtol=1e-6)


def test_one_long_update_scores_every_window_it_covers(history):
    # a live catch-up after a fit or a restart passes hours of steps in one update
    stepwise, at_once = _tiny().fit(history), _tiny().fit(history)
    window = stepwise.mix_.window
    steps = history[-1440 : -1440 + 5 * window + 7]
    for i in range(steps.shape[0]):
        stepwise.update(steps[i : i + 1])
    at_once.update(steps)
    assert at_once.mix_.scored == stepwise.mix_.scored == 5
    np.testing.assert_allclose(at_once.mix_.errors, stepwise.mix_.errors, rtol=1e-9)
    assert at_once.mix_.needed == stepwise.mix_.needed == window - 7
    np.testing.assert_allclose(at_once.predict(10), stepwise.predict(10), rtol=1e-9)


def test_a_model_saved_without_its_mstl_half_loads_as_the_transformer_alone(tmp_path, history):
    alone = FedformerForecaster(dataclasses.replace(TINY, mstl_weight=0.0)).fit(history)
    alone.save(tmp_path / "alone.npz")
    again = FedformerForecaster.load(tmp_path / "alone.npz")
    assert again.mstl_ is None and again.settings.mstl_weight == 0.0
    np.testing.assert_allclose(again.predict(20), alone.predict(20), rtol=1e-6)


def _weights(model):
    return [p.detach().clone() for p in model.net_.parameters()]


def test_fit_from_continues_from_the_earlier_fit(history):
    earlier = _tiny().fit(history[:-1440])
    # no fine-tuning steps: the earlier network, its error quantiles from the new windows
    kept = FedformerForecaster(dataclasses.replace(TINY, finetune_steps=0))
    kept.fit_from(earlier, history)
    for a, b in zip(_weights(earlier), _weights(kept), strict=True):
        assert (a == b).all()
    assert kept.history_ is not None and kept.offset_ > earlier.offset_
    # fine-tuned: moved from the earlier weights, never worse on the validation windows
    tuned = FedformerForecaster(dataclasses.replace(TINY, finetune_steps=10)).fit_from(
        earlier, history
    )
    assert any(not (a == b).all() for a, b in zip(_weights(earlier), _weights(tuned), strict=True))
    assert tuned.val_mae_ <= kept.val_mae_
    # it is another model than a fit from scratch on the same history
    scratch = _tiny().fit(history)
    assert not np.array_equal(scratch.predict(30), tuned.predict(30))


def test_fit_from_a_model_that_does_not_match_is_a_fit_from_scratch(history):
    scratch = _tiny().fit(history).predict(30)
    other_shape = FedformerForecaster(
        dataclasses.replace(TINY, net=dataclasses.replace(TINY.net, d_model=16))
    ).fit(history[:-1440])
    for previous in (other_shape, _tiny(), SeasonalNaive().fit(history)):  # unfitted, other kind
        np.testing.assert_array_equal(_tiny().fit_from(previous, history).predict(30), scratch)


def test_a_fine_tune_much_worse_than_the_earlier_fit_is_trained_from_scratch(history):
    from streamtrain.forecast.fedformer import RETRAIN_RATIO

    earlier = _tiny().fit(history[:-1440])
    tuned = _tiny().fit_from(earlier, history)
    assert tuned.val_mae_ <= RETRAIN_RATIO * earlier.val_mae_  # a usual day: fine-tuned
    assert any(
        not (a == b).all()
        for a, b in zip(_weights(tuned), _weights(_tiny().fit(history)), strict=True)
    )
    # the earlier network fitted its windows exactly: any error on the new ones is worse
    earlier.val_mae_ = 0.0
    retrained = _tiny().fit_from(earlier, history)
    np.testing.assert_array_equal(retrained.predict(30), _tiny().fit(history).predict(30))


@pytest.mark.parametrize("start_offset", [0, 7])
def test_a_fold_walked_at_once_forecasts_as_a_walk_one_origin_at_a_time(history, start_offset):
    from streamtrain.forecast.folds import origins, walk_model

    alone = dataclasses.replace(TINY, mstl_weight=0.0)
    start = len(history) - 400 + start_offset
    end = len(history)
    model = FedformerForecaster(alone, seed=3).fit(history[:start])
    at_once, one_by_one = copy.deepcopy(model), copy.deepcopy(model)
    batched = at_once.walk(history, start, origins(start, end, 30, 30), end, 30)
    assert batched is not None and len(batched) == len(origins(start, end, 30, 30))
    seen, expected = start, []
    for origin in origins(start, end, 30, 30):
        one_by_one.update(history[seen:origin])
        seen = origin
        expected.append(np.maximum(one_by_one.predict(30), 0.0))
    one_by_one.update(history[seen:end])
    # one pass over the fold's windows, one pass per window: float32 rounding apart
    np.testing.assert_allclose(np.concatenate(batched), np.concatenate(expected), rtol=1e-5)
    assert at_once.history_ is not None and one_by_one.history_ is not None
    assert np.array_equal(at_once.history_, one_by_one.history_)
    assert at_once.offset_ == one_by_one.offset_
    assert np.array_equal(at_once.predict(45), one_by_one.predict(45))  # the same model after
    walked = walk_model(copy.deepcopy(model), history, start, end, 30, 30)  # what folds use
    np.testing.assert_array_equal(np.concatenate(walked), np.concatenate(batched))


def test_with_an_mstl_share_a_fold_is_walked_one_origin_at_a_time(history, fitted):
    start = len(history)
    assert fitted.mstl_ is not None
    assert fitted.walk(history, start, [start], start, 30) is None
