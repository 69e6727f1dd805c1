"""Intervals over seeds, the lag-to-AUC mapping, and the tables beside the paper."""

import math
from pathlib import Path

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.sim.auc import MEASURED_CURVE, StalenessCurve, auc_pct
from streamtrain.sim.metrics import PolicyMetrics
from streamtrain.sim.paper import TABLE3, TABLE3_METRICS
from streamtrain.sim.report import (
    format_paper_table,
    format_table,
    headline_ratios,
    paper_claims,
)
from streamtrain.sim.stats import Interval, differs, interval, ratio_interval, summarize

REPO = Path(__file__).resolve().parents[3]


def _metrics(lag, wh, violation=0.0, auc=95.3, auc_se=0.0):
    return PolicyMetrics(violation, lag, 10.0, wh, 5, 1.0, auc, 0.0, 0.0, 0.0, auc_se)


def test_student_t_interval():
    values = [10.0, 12.0, 11.0, 13.0, 9.0]
    got = interval(values)
    # mean 11, s = 1.5811, t(0.975, 4) = 2.7764
    assert got.mean == 11.0
    assert got.half_width == pytest.approx(2.7764 * 1.5811 / math.sqrt(5), rel=1e-4)
    assert got.contains(12.5) and not got.contains(13.0)
    single = interval([4.0])
    assert single.mean == 4.0 and math.isnan(single.half_width) and not single.contains(4.0)
    with pytest.raises(ConfigError):
        interval([])
    with pytest.raises(ConfigError):
        interval([1.0, math.nan])


def test_ratio_interval_by_the_delta_method():
    x, y = [1.0, 2.0, 3.0], [10.0, 12.0, 14.0]
    got = ratio_interval(x, y)
    assert got.mean == pytest.approx(2.0 / 12.0)
    se_x, se_y = 1.0 / math.sqrt(3), 2.0 / math.sqrt(3)
    t2 = 4.302653  # t(0.975, 2)
    expected = t2 * (2 / 12) * math.sqrt((se_x / 2) ** 2 + (se_y / 12) ** 2)
    assert got.half_width == pytest.approx(expected, rel=1e-5)
    # the same numbers with no spread in the denominator: only the numerator's error
    flat = ratio_interval(x, [12.0, 12.0, 12.0])
    assert flat.half_width == pytest.approx(t2 * se_x / 12, rel=1e-5)
    assert math.isnan(ratio_interval([1.0], [2.0]).half_width)
    with pytest.raises(ConfigError):
        ratio_interval([1.0, 2.0], [0.0, 0.0])


def test_differs_means_outside_both_intervals():
    ours = Interval(100.0, 10.0, 20)
    assert not differs(ours, 105.0, 0.0)
    assert differs(ours, 115.0, 2.0)
    assert not differs(ours, 115.0, 6.0)
    assert differs(Interval(100.0, math.nan, 1), 101.0)


def test_the_measured_curve_is_the_staleness_benchmarks_file():
    """MEASURED_CURVE holds docs/img/staleness.csv's means and drop covariance."""
    rows = np.loadtxt(REPO / "docs" / "img" / "staleness.csv", delimiter=",", skiprows=1)
    again = StalenessCurve.from_evaluations((0, 5, 10, 20, 40), rows[:, 1:])
    assert again.lags_min == MEASURED_CURVE.lags_min
    assert np.allclose(again.auc, MEASURED_CURVE.auc, rtol=1e-6)
    assert np.allclose(again.drop_cov, MEASURED_CURVE.drop_cov, rtol=1e-6)


def test_a_lag_trace_is_looked_up_on_the_curve_with_its_error():
    curve = StalenessCurve.from_evaluations(
        (0, 10, 20), [[0.80, 0.78, 0.70], [0.82, 0.79, 0.74], [0.78, 0.77, 0.66]]
    )
    assert curve.auc == pytest.approx((0.80, 0.78, 0.70))
    # no lag: the fresh model, no error from the drops
    fresh, fresh_se = auc_pct(np.zeros(10), curve)
    assert fresh == pytest.approx(80.0)
    assert fresh_se == 0.0
    # 15 min all the time: halfway between 10 and 20; flat past 20
    value, se = auc_pct(np.full(4, 900.0), curve)
    assert value == pytest.approx(74.0)
    drops = np.array([[0.02, 0.10], [0.03, 0.08], [0.01, 0.12]])
    w = np.array([0.5, 0.5])
    assert se == pytest.approx(100 * math.sqrt(w @ (np.cov(drops.T) / 3) @ w))
    assert auc_pct(np.full(3, 3600.0), curve)[0] == pytest.approx(70.0)
    # half the time at 0, half at 20: the mean of the two
    assert auc_pct(np.array([0.0, 1200.0]), curve)[0] == pytest.approx(75.0)
    with pytest.raises(ConfigError):
        StalenessCurve((0.0, 5.0, 5.0), (0.8, 0.7, 0.6), ((0.0, 0.0), (0.0, 0.0)))
    with pytest.raises(ConfigError):
        StalenessCurve.from_evaluations((0, 5), [[0.8, 0.7]])


def test_the_auc_interval_holds_the_curves_error():
    per_seed = {"p": [_metrics(10.0, 1.0, auc=79.0, auc_se=0.5)] * 3}
    cell = summarize(per_seed)["p"]["auc_pct"]
    assert cell.mean == pytest.approx(79.0)
    assert cell.half_width == pytest.approx(1.96 * 0.5)  # the seeds agree: only the curve


def test_the_paper_table_sets_our_cells_beside_table3():
    per_seed = {
        "hpa": [_metrics(7000.0, 270.0, 0.19, 95.1), _metrics(7300.0, 266.0, 0.20, 95.1)],
        "kale": [_metrics(1000.0, 240.0), _metrics(1100.0, 244.0)],
        "streamtrain": [_metrics(500.0, 230.0)] * 2,
    }
    summary = summarize(per_seed)
    text = format_paper_table(summary)
    lines = text.splitlines()
    assert len(lines) == 2 + 3
    assert "7,151 ± 150" in lines[2]  # the paper's HPA lag cell
    assert "1,050 ± " in lines[3] and " *" in lines[3]  # KALE's lag differs from 2,204
    assert lines[4].count("| - ") == len(TABLE3_METRICS)  # no streamtrain row in the paper
    ratios = headline_ratios(summary)
    assert ratios["kale_vs_hpa_lag_pct"] == pytest.approx(100 * (7150 - 1050) / 7150)
    assert ratios["streamtrain_vs_kale_lag_pct"] == pytest.approx(100 * (1050 - 500) / 1050)
    assert ratios["streamtrain_wh_ratio"] == pytest.approx(230 / 242)
    table = format_table(summary)
    assert table.splitlines()[0].split()[:3] == ["policy", "violation", "%"]
    assert set(TABLE3) == {"adequate", "hpa", "autopilot", "madu", "kale"}


def test_the_papers_claims_are_checked_beyond_the_intervals():
    def row(lag, viol, wh, down, auc):
        return {
            "accumulated_lag_min": Interval(lag, 10.0, 20),
            "violation_rate": Interval(viol, 0.001, 20),
            "worker_hours": Interval(wh, 1.0, 20),
            "downtime_min": Interval(down, 1.0, 20),
            "auc_pct": Interval(auc, 0.01, 20),
        }

    cells = {
        "hpa": row(100.0, 0.0, 300.0, 5.0, 79.0),
        "autopilot": row(90.0, 0.0, 320.0, 5.0, 79.0),
        "madu": row(80.0, 0.0, 250.0, 5.0, 79.0),
        "kale": row(1000.0, 0.0, 280.0, 2.0, 78.5),
    }
    verdicts = {c.key: c.verdict for c in paper_claims(cells)}
    assert verdicts == {
        "lag": "reversed",  # 1,000 vs 100: the paper's ranking turned round
        "violations": "not distinguishable",  # all 0
        "worker_hours": "mixed",  # below HPA and Autopilot, above Madu
        "downtime": "reproduced",
        "auc": "reversed",
    }
    lag = next(c for c in paper_claims(cells) if c.key == "lag")
    assert "kale 1,000 ± 10 vs hpa 100 ± 10" in lag.detail
    cells["kale-tuned"] = row(50.0, 0.0, 260.0, 5.0, 79.2)
    tuned = {c.key: c.verdict for c in paper_claims(cells, "kale-tuned")}
    assert tuned["lag"] == "reproduced" and tuned["downtime"] == "not distinguishable"
    assert tuned["worker_hours"].startswith("mixed")
    del cells["madu"]
    assert {c.key for c in paper_claims(cells)} == {"lag", "violations"}
