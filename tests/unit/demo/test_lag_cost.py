"""The demo's auc_lost_to_lag: the pure lookup of its lag reports on a curve."""

from __future__ import annotations

import pytest

from streamtrain.demo.lag_cost import LagCostCurve, auc_lost_to_lag
from streamtrain.demo.settings import DemoSettings
from streamtrain.errors import ConfigError

CURVE = {0: 0.80, 10: 0.78, 60: 0.60}


def _report(at_s: float, lags: list[float | None]) -> dict[str, object]:
    present = [x for x in lags if x is not None]
    return {"at_s": at_s, "partition_lag_s": lags, "max_lag_s": max(present, default=None)}


def test_the_loss_is_the_time_weighted_curve_at_the_runs_lag():
    # speed 144: 1 wall s = 2.4 simulated min; partition lags 0 and 5 s -> mean 2.5 s =
    # 6 simulated min (0.012 lost), job lag 5 s = 12 min (0.02 + 2/50 * 0.18 = 0.0272)
    reports = [_report(0.0, [0.0, 0.0]), _report(1.0, [0.0, 5.0]), _report(3.0, [None, 0.0])]
    losses = auc_lost_to_lag(reports, CURVE, started_at_s=0.0, ended_at_s=10.0, speed=144)
    # the 1-s interval at 6 min, the 2-s interval at 0
    assert losses["mean_partition_lag"] == pytest.approx(0.012 / 3, abs=1e-5)
    assert losses["job_lag"] == pytest.approx(0.0272 / 3, abs=1e-5)
    assert losses["mean_lag_min"] == pytest.approx(2.0)
    job, mean = losses["job_lag"], losses["mean_partition_lag"]
    assert job is not None and mean is not None and job > mean


def test_no_loss_without_two_reports_in_the_run():
    reports = [_report(0.0, [1.0]), _report(50.0, [1.0])]
    losses = auc_lost_to_lag(reports, CURVE, started_at_s=10.0, ended_at_s=40.0, speed=144)
    assert losses == {"mean_partition_lag": None, "job_lag": None, "mean_lag_min": None}


def test_until_the_curve_is_measured_the_summary_says_so():
    curve = LagCostCurve(drift_turns_per_day=6, records_per_day=388_000)
    assert curve.config.records_per_min == 269
    assert curve.config.drift_turns_per_day == 6
    loss = curve.loss([], started_at_s=0.0, ended_at_s=1.0, speed=144)
    assert loss["auc_lost_to_lag"] is None
    curve.curve = dict(CURVE)
    reports = [_report(0.0, [0.0]), _report(1.0, [25.0])]  # 60 simulated min
    loss = curve.loss(reports, started_at_s=0.0, ended_at_s=1.0, speed=144)
    assert loss["auc_lost_to_lag"] == pytest.approx(0.2)
    assert loss["auc_lost_to_lag_detail"]["curve"]["60"] == 0.6
    assert "6 times a day" in loss["auc_lost_to_lag_detail"]["basis"]


def test_the_demo_refuses_a_negative_drift():
    with pytest.raises(ConfigError, match="drift"):
        DemoSettings(drift_turns_per_day=-1)
    assert DemoSettings().drift_turns_per_day == 0.5
