"""The FEDformer-style forecaster's settings: one NetConfig, flat options, saved form."""

import dataclasses

import pytest

from streamtrain.errors import ConfigError
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.fedformer_settings import FedformerSettings, NetConfig

# What a model saved before the network's fields moved into NetConfig stores
# (the `settings` of its metadata): the defaults that reached the network then.
SAVED_BEFORE = {
    "coarse_s": 1800,
    "seq_len": 48,
    "label_len": 12,
    "pred_len": 6,
    "smooth_steps": 31,
    "baseline_periods": 3,
    "weigh_by_level": True,
    "d_model": 32,
    "n_heads": 4,
    "e_layers": 2,
    "d_layers": 1,
    "d_ff": 64,
    "moving_avg": 13,
    "dropout": 0.0,
    "factor": 3,
    "train_steps": 600,
    "batch_size": 32,
    "learning_rate": 0.001,
    "val_fraction": 0.15,
    "val_every": 100,
    "threads": 1,
    "anchor_blocks": 1,
    "trend_from_mean": False,
}


def test_defaults_are_the_forecasters_and_round_trip_through_options():
    settings = FedformerSettings()
    now = dict(SAVED_BEFORE)
    now["smooth_s"] = 60 * now.pop("smooth_steps")  # the window is in seconds now
    now["baseline_median"] = False  # settings added since: their default is the old way
    now["train_steps"] = 400  # at 3e-3: as accurate as 1,200 at 1e-3 (600 at 1e-3 was not)
    now["learning_rate"] = 3e-3
    now["finetune_steps"] = 50  # a fit continued from an earlier fit's weights
    now["finetune_learning_rate"] = 3.3e-4
    now["mstl_weight"] = 0.5  # combined with MSTL by default
    now["adapt_weight"] = True
    assert settings.options() == now
    saved = FedformerSettings.from_options(**SAVED_BEFORE)
    assert saved == dataclasses.replace(settings, train_steps=600, learning_rate=0.001)
    with pytest.raises(ConfigError, match="mstl_weight"):
        FedformerSettings(mstl_weight=1.0)
    assert settings.net == NetConfig(seq_len=48, label_len=12, pred_len=6, mark_dim=4)
    assert settings.net.dropout == 0.0 and settings.net.trend_from_mean is False


def test_flat_options_go_to_the_network_or_the_settings():
    settings = FedformerSettings.from_options(seq_len=36, d_model=8, factor=2, train_steps=20)
    assert settings.net.seq_len == 36 and settings.net.d_model == 8
    assert settings.net.factor == 2  # the attention factor, not steps per block
    assert settings.train_steps == 20
    assert FedformerSettings.from_options(**settings.options()) == settings


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        FedformerSettings.from_options(no_such_option=1)
    with pytest.raises(ConfigError, match=r"unknown option.*mark_dim"):
        FedformerSettings.from_options(mark_dim=5)  # fixed by the time features
    with pytest.raises(ConfigError, match="time features"):
        FedformerSettings(NetConfig(mark_dim=5))
    with pytest.raises(ConfigError, match="label_len"):
        FedformerSettings(NetConfig(label_len=49))
    with pytest.raises(ConfigError, match="seq_len"):
        FedformerSettings(NetConfig(seq_len=7, label_len=7))


def test_steps_per_block_is_the_block_over_the_step():
    model = FedformerForecaster(FedformerSettings(coarse_s=1800), step_s=60)
    assert model.steps_per_block == 30
    assert model.settings.net.factor == 3
