"""Table 3's metrics from a run (AUC and shuffle costs too), and the partition skew the
workload is split by."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.sim.auc import MEASURED_CURVE
from streamtrain.sim.engine import Action, Run
from streamtrain.sim.metrics import compute_metrics
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares


def _run(lag_s, workers, paused, actions=(), forwarded=None, shuffle=False):
    n = len(lag_s)
    paused = np.asarray(paused, dtype=bool)
    return Run(
        policy="p",
        tick_s=60,
        lag_s=np.asarray(lag_s, dtype=float),
        backlog_records=np.zeros(n),
        workers=np.asarray(workers),
        training_workers=np.asarray(workers),
        paused=paused,
        paused_s=paused * 60.0,
        worker_s=np.asarray(workers, dtype=float) * 60.0,
        forwarded_records=np.zeros(n) if forwarded is None else np.asarray(forwarded, float),
        actions=tuple(actions),
        arrived_records=0.0,
        consumed_records=1000.0,
        final_backlog_records=0.0,
        shuffle=shuffle,
    )


def test_metrics_by_hand():
    # Four one-minute ticks: lag 0, 30 min, 10 min, 0; two of them paused.
    action = Action(60.0, 2, 4, "proactive", 0.0, 120.0, "")
    run = _run([0, 1800, 600, 0], [2, 4, 4, 4], [False, True, True, False], [action])
    m = compute_metrics(run)
    assert m.violation_rate == 0.25  # one minute of four above 20 min
    assert m.accumulated_lag_min == pytest.approx(40.0)  # (0 + 30 + 10 + 0) lag-min x 1 min
    assert m.downtime_min == 2.0
    assert m.worker_hours == pytest.approx(14 / 60)
    assert m.scaling_actions == 1
    assert m.peak_lag_min == 30.0
    # AUC on the measured curve: lag 0, 30 min (halfway 20-40), 10 min, 0
    a = MEASURED_CURVE.auc
    expected = (a[0] + (a[3] + a[4]) / 2 + a[2] + a[0]) / 4
    assert m.auc_pct == pytest.approx(100 * expected)
    assert m.auc_curve_se_pp > 0
    assert m.forwarded_pct == 0 and m.forwarded_gb == 0 and m.shuffle_cpu_s == 0
    assert set(m.as_dict()) == {
        "violation_rate",
        "accumulated_lag_min",
        "downtime_min",
        "worker_hours",
        "scaling_actions",
        "peak_lag_min",
        "auc_pct",
        "forwarded_pct",
        "forwarded_gb",
        "shuffle_cpu_s",
        "auc_curve_se_pp",
    }


def test_shuffle_costs_and_gain():
    run = _run([0, 0], [2, 2], [False, False], forwarded=[100.0, 150.0], shuffle=True)
    m = compute_metrics(run)
    assert m.forwarded_pct == pytest.approx(25.0)  # 250 of the 1,000 consumed
    assert m.forwarded_gb == pytest.approx(250 * 200 / 1e9)
    assert m.shuffle_cpu_s == pytest.approx(250 / 1_097_542)
    # no lag: the fresh model's AUC; shuffling adds nothing beyond the lag it removes
    assert m.auc_pct == pytest.approx(100 * MEASURED_CURVE.auc[0])
    assert m.auc_curve_se_pp == 0


def test_custom_slo():
    run = _run([0, 700, 0, 0], [1] * 4, [False] * 4)
    assert compute_metrics(run, slo_lag_s=600).violation_rate == 0.25
    with pytest.raises(ConfigError):
        compute_metrics(run, slo_lag_s=0)


def test_shares_sum_to_one_and_are_deterministic():
    settings = SkewSettings(partitions=100, sigma=0.5, seed=4)
    a = partition_shares(50, 60, settings)
    np.testing.assert_allclose(a.sum(axis=1), 1.0)
    np.testing.assert_array_equal(a, partition_shares(50, 60, settings))
    assert not np.array_equal(a, partition_shares(50, 60, SkewSettings(100, 0.5, seed=5)))


def test_no_skew_is_even():
    shares = partition_shares(3, 60, SkewSettings(partitions=4, sigma=0.0))
    np.testing.assert_allclose(shares, 0.25)


def test_hot_partitions_drift():
    settings = SkewSettings(partitions=400, sigma=0.5, drift_s=3600.0, seed=1)
    shares = np.log(partition_shares(24 * 60, 60, settings))
    near = np.corrcoef(shares[0], shares[10])[0, 1]  # 10 minutes apart
    far = np.corrcoef(shares[0], shares[-1])[0, 1]  # a day apart
    assert near > 0.75 and abs(far) < 0.2  # exp(-10/60) = 0.85 expected


def test_partition_arrivals_and_their_cumulative_sums():
    shares = np.array([[0.25, 0.75], [0.5, 0.5]])
    per_step, cumulative = partition_arrivals(np.array([2.0, 4.0]), shares, 60)
    np.testing.assert_allclose(per_step, [[30, 90], [120, 120]])
    np.testing.assert_allclose(cumulative, [[0, 0], [30, 90], [150, 210]])
    with pytest.raises(ConfigError):
        partition_arrivals(np.array([np.nan, 1.0]), shares, 60)


def test_bad_skew_settings():
    with pytest.raises(ConfigError):
        SkewSettings(partitions=0)
    with pytest.raises(ConfigError):
        SkewSettings(sigma=-1)
