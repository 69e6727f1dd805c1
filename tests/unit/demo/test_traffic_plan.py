"""The demo's traffic plan: compression, peak scaling, skew, monotonic due counts."""

import numpy as np
import pytest

from streamtrain.demo.traffic import TrafficPlan
from streamtrain.errors import ConfigError


def test_a_day_is_compressed_scaled_to_its_peak_and_skewed():
    plan = TrafficPlan.from_trace(duration_s=600, peak_records_per_s=1000, partitions=16)
    assert plan.partitions == 16
    assert plan.records_per_s.max() == pytest.approx(1000)
    assert plan.step_wall_s == pytest.approx(600 / 1440)
    # KALE Fig. 2a: the evening peak is several times the early-morning trough.
    assert plan.records_per_s.max() / plan.records_per_s.min() > 4
    total = plan.cumulative[-1]
    expected = (plan.records_per_s * plan.step_wall_s).sum()
    assert total.sum() == pytest.approx(expected)
    assert total.max() / total.min() > 2  # hot and cold partitions


def test_due_counts_never_decrease_and_end_at_the_total():
    plan = TrafficPlan.from_trace(duration_s=60, peak_records_per_s=500, partitions=4, seed=3)
    previous = np.zeros(4, dtype=np.int64)
    for elapsed in np.linspace(-1, 61, 400):
        due = plan.due(float(elapsed))
        assert (due >= previous).all()
        previous = due
    assert plan.due(0.0).sum() == 0
    assert plan.due(60.0).sum() == plan.total_records
    assert plan.due(1e9).sum() == plan.total_records


@pytest.mark.parametrize(
    "kwargs", [{"duration_s": 0}, {"peak_records_per_s": -1}, {"duration_s": float("nan")}]
)
def test_bad_settings_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        TrafficPlan.from_trace(**kwargs)
