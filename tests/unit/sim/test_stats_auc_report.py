"""Intervals over seeds, the lag-to-AUC mapping, and the tables beside the paper."""

import math

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.sim.auc import AucModel, auc_pct
from streamtrain.sim.metrics import PolicyMetrics
from streamtrain.sim.paper import TABLE3, TABLE3_METRICS
from streamtrain.sim.report import format_paper_table, format_table, headline_ratios
from streamtrain.sim.stats import Interval, differs, interval, summarize


def _metrics(lag, wh, violation=0.0, auc=95.3):
    return PolicyMetrics(violation, lag, 10.0, wh, 5, 1.0, auc, 0.0, 0.0, 0.0)


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


def test_differs_means_outside_both_intervals():
    ours = Interval(100.0, 10.0, 20)
    assert not differs(ours, 105.0, 0.0)
    assert differs(ours, 115.0, 2.0)
    assert not differs(ours, 115.0, 6.0)
    assert differs(Interval(100.0, math.nan, 1), 101.0)


def test_the_auc_mapping_reproduces_table3_rows():
    minute = np.full(1440, 0.0)
    assert auc_pct(minute, shuffle=False) == pytest.approx(95.3)
    assert auc_pct(minute, shuffle=True) == pytest.approx(95.8)
    # HPA's row: lag near 25 min for 19.6 % of the day, near 0 otherwise: 95.1 %.
    hpa = np.where(np.arange(1440) < 282, 25 * 60.0, 0.0)
    assert auc_pct(hpa, shuffle=False) == pytest.approx(95.1, abs=0.01)
    model = AucModel()
    below, above = model.loss_pp(np.array([600.0, 1200.0]))
    assert above - below == pytest.approx(4 * below)  # steep slope = 4 x slow, past 10 min
    with pytest.raises(ConfigError):
        AucModel(slow_pp_per_min=-1.0)


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
