"""The planner's seed history for the demo: the days before the demo's day."""

import numpy as np
import pytest

from streamtrain.demo.history import demo_seed_history, seed_history, write_seed_history
from streamtrain.demo.traffic import last_day
from streamtrain.forecast.trace import Trace
from streamtrain.scale.timescale import read_seed_history


def test_seed_history_is_the_days_before_per_planning_step():
    day = 1440  # one-minute trace steps
    rates = np.concatenate([np.full(day, 10.0), np.full(day, 20.0), np.full(day, 99.0)])
    seeded = seed_history(rates, 60, 0.5)
    assert len(seeded) == 2 * day // 5  # 5-minute planning steps, the last day left out
    assert seeded[0] == 5.0 and seeded[-1] == 10.0


def test_demo_seed_history_is_scaled_like_the_demo_day(tmp_path):
    day = 1440
    rates = np.concatenate([np.full(day, 10.0), np.full(day, 50.0)])
    rates[-1] = np.nan  # a gap in the demo's day counts as no traffic
    trace = Trace(0.0, 60, rates)
    assert last_day(trace).max() == 50.0 and last_day(trace)[-1] == 0.0
    # The day's peak (50) becomes 1000 records per wall second, 10 per model second.
    seeded = demo_seed_history(trace, peak_records_per_s=1000.0, speed=100.0)
    assert seeded == [2.0] * (day // 5)
    path = write_seed_history(tmp_path / "seed.json", seeded, end_at_s=1_700_000_000.5)
    history, end_s = read_seed_history(path)
    assert history.step_s == 300 and list(history.records_per_s) == seeded
    assert end_s == pytest.approx(1_700_000_000.5)
