"""The Table 2 experiment's pure metrics and the MMoE trainer's pure helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.experiments.mmoe_trainer import decode_ctr, drift_phase_at
from streamtrain.experiments.table2_metrics import (
    PAPER_TABLE2,
    accumulated_lag,
    auc_summary,
    lag_seconds,
    relative_change,
)
from streamtrain.ingest.example import SyntheticCtr, split_records
from streamtrain.records import RecordColumns


def test_lag_seconds_is_the_wait_of_the_oldest_uncommitted_record():
    history_s = np.array([10.0, 11.0, 12.0])
    counts = np.array([[5, 0], [10, 0], [20, 3]])
    # partition 0: records 0-4 at 10 s, 5-9 at 11 s, 10-19 at 12 s; committed 7 -> record 7
    # was produced at 11 s; partition 1: everything committed -> 0
    lag = lag_seconds(history_s, counts, np.array([7, 3]), now_s=15.0)
    assert lag.tolist() == [4.0, 0.0]
    # nothing committed yet: the first record's age
    assert lag_seconds(history_s, counts, np.array([0, 0]), 15.0).tolist() == [5.0, 3.0]
    assert lag_seconds(
        np.zeros(0), np.zeros((0, 2), dtype=np.int64), np.array([0, 0]), 1.0
    ).tolist() == [0, 0]


def test_accumulated_lag_integrates_each_partition():
    times = np.array([0.0, 1.0, 3.0])
    lag = np.array([[0.0, 2.0], [2.0, 2.0], [0.0, 2.0]])
    assert accumulated_lag(times, lag).tolist() == [1.0 + 2.0, 6.0]
    assert accumulated_lag(times[:1], lag[:1]).tolist() == [0.0, 0.0]


def test_auc_summary_means_while_producing_at_the_stop_and_at_the_end():
    evaluations = {
        "w0": [
            {"at_s": 99.0, "auc": 0.5},  # before the producer: not in `during`
            {"at_s": 100.0, "auc": 0.6},
            {"at_s": 110.0, "auc": 0.8},
            {"at_s": 130.0, "auc": 0.9},
        ],
        "w1": [{"at_s": 105.0, "auc": 0.7}, {"at_s": 125.0, "auc": math.nan}],
        "w2": [],
    }
    summary = auc_summary(evaluations, started_at_s=100.0, stopped_at_s=120.0)
    assert summary.during == pytest.approx((0.7 + 0.7) / 2)
    assert summary.min_during == pytest.approx(0.7)
    assert summary.at_stop == pytest.approx((0.8 + 0.7) / 2)
    assert summary.final == pytest.approx((0.9 + 0.7) / 2)
    assert summary.evaluations == 5
    assert math.isnan(auc_summary({}, started_at_s=0, stopped_at_s=1).during)


def test_kales_relative_changes_are_the_papers():
    none, basic, advanced = (PAPER_TABLE2[k][0] for k in ("none", "basic", "advanced"))
    assert relative_change(advanced, basic) == pytest.approx(-13.6, abs=0.05)
    assert relative_change(basic, none) == pytest.approx(21.2, abs=0.05)
    assert math.isnan(relative_change(1.0, 0.0))


def test_decode_ctr_reads_the_records_back_and_refuses_other_payloads():
    table = SyntheticCtr().sample(5, first_id=40)
    columns = RecordColumns.from_values("t", [0] * 5, list(range(5)), [0] * 5, split_records(table))
    assert decode_ctr(columns)["id"].tolist() == [40, 41, 42, 43, 44]
    bad = RecordColumns.from_values("t", [0], [0], [0], [b"x" * 10])
    with pytest.raises(ConfigError, match="10 bytes"):
        decode_ctr(bad)


def test_the_drift_phase_follows_the_producer_clock_and_stops_with_it():
    clock = {"start_at_s": 100.0, "produce_s": 30.0, "drift_turns": 0.3}
    assert drift_phase_at(90.0, clock) == 0.0
    assert drift_phase_at(115.0, clock) == pytest.approx(0.15)
    assert drift_phase_at(500.0, clock) == pytest.approx(0.3)
