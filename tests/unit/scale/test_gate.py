"""The downtime-aware gate (DLRover-RM Eq. 8) and the fluid backlog model under it."""

from typing import Any

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.gate import (
    capacity_path,
    estimated_lag_s,
    gate_scale_down,
    gate_scale_up,
    meets_lag_goal,
    project_backlog,
)


def _loop_backlog(loads, capacity, backlog, step_s):
    out = []
    for load, cap in zip(loads, capacity, strict=True):
        backlog = max(0.0, backlog + (load - cap) * step_s)
        out.append(backlog)
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_backlog_matches_lindleys_recursion(seed):
    rng = np.random.default_rng(seed)
    loads = rng.uniform(0, 100, 200)
    capacity = rng.uniform(0, 100, 200)
    expected = _loop_backlog(loads, capacity, 500.0, 60.0)
    got = project_backlog(loads, capacity, backlog_records=500.0, step_s=60.0)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-6)


def test_backlog_for_many_candidates_at_once():
    loads = np.full(5, 10.0)
    paths = np.array([np.full(5, 5.0), np.full(5, 20.0)])
    got = project_backlog(loads, paths, backlog_records=100.0, step_s=10.0)
    np.testing.assert_allclose(got[0], [150, 200, 250, 300, 350])
    np.testing.assert_allclose(got[1], [0, 0, 0, 0, 0])


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ConfigError):
        project_backlog(np.ones(3), np.ones(4), backlog_records=0.0, step_s=1.0)


def test_capacity_path_prorates_prep_and_pause():
    # 60-s steps; prep 90 s at the old 10/s, pause 60 s, then 30/s.
    path = capacity_path(
        4, current_records_per_s=10, target_records_per_s=30, step_s=60, prep_s=90, pause_s=60
    )
    np.testing.assert_allclose(path, [10, 5, 15, 30])


def test_estimated_lag_is_backlog_over_load():
    np.testing.assert_allclose(
        estimated_lag_s(np.array([600.0, 0.0]), np.array([10.0, 10.0])), [60.0, 0.0]
    )


def test_scale_up_that_pays_for_its_pause_passes():
    # An hour at 150/s against 100/s now: 200/s after a 10-min pause saves far more
    # than the 60,000 records the pause leaves.
    verdict = gate_scale_up(
        np.full(60, 150.0),
        current_records_per_s=100.0,
        target_records_per_s=200.0,
        backlog_records=0.0,
        step_s=60.0,
        pause_s=600.0,
    )
    assert verdict.accept
    assert verdict.overhead == pytest.approx(100.0 * 600)
    assert verdict.saved > verdict.overhead


def test_scale_up_for_a_short_spike_fails():
    # The load exceeds capacity for 5 minutes only: a 10-min pause costs more than it saves.
    loads = np.concatenate([np.full(5, 120.0), np.full(25, 80.0)])
    verdict = gate_scale_up(
        loads,
        current_records_per_s=100.0,
        target_records_per_s=200.0,
        backlog_records=0.0,
        step_s=60.0,
        pause_s=600.0,
    )
    assert not verdict.accept
    assert "fails" in verdict.explanation


def test_two_phase_prep_keeps_the_old_workers_training():
    common: dict[str, Any] = dict(
        current_records_per_s=100.0, target_records_per_s=200.0, backlog_records=0.0, step_s=60.0
    )
    one_phase = gate_scale_up(np.full(30, 150.0), pause_s=600.0, **common)
    two_phase = gate_scale_up(np.full(30, 150.0), pause_s=180.0, prep_s=420.0, **common)
    assert two_phase.overhead < one_phase.overhead


def test_small_scale_down_waits_for_a_larger_one():
    loads = np.full(90, 50.0)
    common: dict[str, Any] = dict(
        current_workers=20,
        backlog_records=0.0,
        step_s=60.0,
        pause_s=600.0,
        hold_s=3600.0,
        drain_s=900.0,
        lag_budget_s=3600.0,
    )
    # 20 -> 19 for an hour frees 60 worker-min; the pause idles 20 x 10 = 200.
    small = gate_scale_down(loads, target_workers=19, target_records_per_s=190.0, **common)
    assert not small.accept
    # 20 -> 10 frees 600 worker-min.
    large = gate_scale_down(loads, target_workers=10, target_records_per_s=100.0, **common)
    assert large.accept, large.explanation


def test_scale_down_that_cannot_drain_the_pause_fails():
    loads = np.full(90, 99.0)
    verdict = gate_scale_down(
        loads,
        current_workers=20,
        target_workers=10,
        target_records_per_s=100.0,
        backlog_records=0.0,
        step_s=60.0,
        pause_s=600.0,
        hold_s=3600.0,
        drain_s=900.0,
        lag_budget_s=1e9,
    )
    assert not verdict.accept
    assert "drain" in verdict.explanation


def test_scale_down_gate_rejects_a_scale_up():
    with pytest.raises(ConfigError):
        gate_scale_down(
            np.ones(3),
            current_workers=2,
            target_workers=3,
            target_records_per_s=1.0,
            backlog_records=0.0,
            step_s=1.0,
            pause_s=0.0,
            hold_s=1.0,
            drain_s=1.0,
            lag_budget_s=1.0,
        )


def test_the_lag_goal_needs_a_drain_in_time_and_no_lag_after_it():
    # Three candidates over 6 steps: drains at step 1 and stays calm; drains at step 4
    # (after the 2-step catch-up); drains at step 1 but lags again at step 3.
    backlog = np.array(
        [
            [5.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [5.0, 4.0, 3.0, 2.0, 0.0, 0.0],
            [5.0, 0.0, 0.0, 3.0, 0.0, 0.0],
        ]
    )
    lag = backlog * 10.0
    ok = meets_lag_goal(
        backlog, lag, resume=1, catchup_steps=2, end=6, tolerated_lag_s=20.0, tolerance=1e-9
    )
    assert ok.tolist() == [True, False, False]
    # The third one's lag at step 3 is within a 30-s tolerance.
    ok = meets_lag_goal(
        backlog, lag, resume=1, catchup_steps=2, end=6, tolerated_lag_s=30.0, tolerance=1e-9
    )
    assert ok.tolist() == [True, False, True]
    # Its lag at step 3 is beyond the window that matters when that window ends first.
    ok = meets_lag_goal(
        backlog, lag, resume=1, catchup_steps=2, end=3, tolerated_lag_s=20.0, tolerance=1e-9
    )
    assert ok.tolist() == [True, False, True]
