"""KALE Fig. 1's experiment: the pure lookup, the settings, and a small real run."""

from __future__ import annotations

import math

import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.staleness import StalenessConfig, lost_auc, measure_staleness


def test_lost_auc_interpolates_the_curve_and_stays_flat_past_it():
    curve = {0: 0.80, 10: 0.78, 40: 0.70}
    assert lost_auc(curve, [0.0, 0.0]) == 0.0
    assert lost_auc(curve, [5.0]) == pytest.approx(0.01)
    assert lost_auc(curve, [100.0]) == pytest.approx(0.10)  # flat past 40 min
    # weighted by time: 3 s at lag 10 (0.02 lost), 1 s at lag 0
    assert lost_auc(curve, [10.0, 0.0], [3.0, 1.0]) == pytest.approx(0.015)
    assert math.isnan(lost_auc(curve, []))
    with pytest.raises(ConfigError):
        lost_auc({5: 0.7}, [1.0])
    with pytest.raises(ConfigError):
        lost_auc(curve, [1.0], [0.0])


def test_the_settings_refuse_what_cannot_be_measured():
    with pytest.raises(ConfigError):
        StalenessConfig(lags_min=(5, 10))  # no fresh model
    with pytest.raises(ConfigError):
        StalenessConfig(lags_min=(0, 60), warmup_min=60)  # warm-up shorter than a lag
    with pytest.raises(ConfigError):
        StalenessConfig(records_per_min=50, batch_records=100)
    assert StalenessConfig(drift_turns_per_day=6).phase(240) == pytest.approx(1.0)


def test_a_model_held_back_far_scores_worse_on_fast_drifting_traffic():
    """Real MMoE training, small: at 12 turns a day a 30-minute copy learnt a hidden model
    turned 90 degrees from today's, so it must rank fresh traffic worse."""
    config = StalenessConfig(
        drift_turns_per_day=12,
        records_per_min=400,
        minutes=71,
        warmup_min=31,
        lags_min=(0, 30),
        eval_every_min=10,
        eval_records=2_000,
    )
    result = measure_staleness(config)
    assert result.auc.shape == (5, 2)
    assert result.trained_records == 71 * 400
    means = result.mean_auc()
    assert means[0] > 0.6
    assert means[30] < means[0] - 0.05
