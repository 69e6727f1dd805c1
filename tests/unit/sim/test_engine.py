"""The simulator's core: conservation, lag by hand, pauses, shuffling, determinism."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel
from streamtrain.sim.engine import Workload, run_policy
from streamtrain.sim.execution import Execution, RestartCosts
from streamtrain.sim.metrics import compute_metrics
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares
from streamtrain.testing import ScriptedPolicy

FIVE_PER_WORKER = ThroughputModel("async", (1.0, 0.0, 0.0), batch_size=5.0)  # F(w) = 5 w


class Never:
    name = "never"
    decision_interval_s = 60.0

    def decide(self, obs):
        return None


def _workload(rates, shares, model=FIVE_PER_WORKER, max_workers=40, tick_s=15):
    rates = np.asarray(rates, dtype=float)
    per_step, cumulative = partition_arrivals(rates, shares, 60)
    return Workload(
        rates, np.zeros(0), 60, 0.0, per_step, cumulative, model, max_workers, tick_s=tick_s
    )


def _skewed(steps, partitions=40, sigma=0.8, seed=3):
    return partition_shares(steps, 60, SkewSettings(partitions, sigma, seed=seed))


def test_one_step_by_hand():
    # One partition, 10 records/s for a minute, one worker at 5/s, 15-s ticks: after
    # t seconds 10 t arrived, 5 t consumed, and the oldest unconsumed record arrived at
    # t / 2, so the lag is t / 2 and the backlog 5 t.
    run = run_policy(_workload([10.0], np.ones((1, 1))), Never(), Execution(), initial_workers=1)
    np.testing.assert_allclose(run.lag_s, [7.5, 15.0, 22.5, 30.0])
    np.testing.assert_allclose(run.backlog_records, [75.0, 150.0, 225.0, 300.0])
    assert run.consumed_records == pytest.approx(300.0)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("two_phase", [True, False])
def test_every_arrival_is_consumed_or_still_in_the_backlog(shuffle, two_phase):
    rng = np.random.default_rng(0)
    rates = rng.uniform(50, 150, 90)
    policy = ScriptedPolicy({600.0: 30, 1800.0: 12, 3000.0: 25})
    run = run_policy(
        _workload(rates, _skewed(90)),
        policy,
        Execution(shuffle=shuffle, two_phase=two_phase),
        initial_workers=20,
    )
    assert len(run.actions) == 3
    assert run.arrived_records == pytest.approx(float(np.sum(rates * 60)))
    assert run.consumed_records + run.final_backlog_records == pytest.approx(
        run.arrived_records, rel=1e-9
    )


@pytest.mark.parametrize("shuffle", [True, False])
def test_no_lag_when_capacity_always_exceeds_arrivals(shuffle):
    # 40 workers at 5/s each against 100/s spread over 40 partitions with a mild skew:
    # even the hottest worker's partitions arrive slower than it trains.
    shares = _skewed(60, partitions=40, sigma=0.1)
    run = run_policy(
        _workload(np.full(60, 100.0), shares),
        Never(),
        Execution(shuffle=shuffle),
        initial_workers=40,
    )
    assert np.all(run.lag_s == 0)
    assert compute_metrics(run).accumulated_lag_min == 0


def test_without_shuffling_hot_partitions_lag_where_shuffling_does_not():
    shares = _skewed(60, partitions=8, sigma=1.0)
    workload = _workload(np.full(60, 100.0), shares)
    shared = run_policy(workload, Never(), Execution(shuffle=True), initial_workers=25)
    owned = run_policy(workload, Never(), Execution(shuffle=False), initial_workers=25)
    assert shared.lag_s.max() == 0
    assert owned.lag_s.max() > 60


def test_pause_and_restart_stops_training_for_the_restart():
    costs = RestartCosts.with_restart_s(600)
    policy = ScriptedPolicy({300.0: 30})
    run = run_policy(
        _workload(np.full(30, 100.0), np.ones((30, 1))),
        policy,
        Execution(shuffle=True, costs=costs),
        initial_workers=25,
    )
    paused = np.flatnonzero(run.paused)
    assert paused[0] * 15 == 300 and len(paused) * 15 == 600
    assert np.all(run.workers[paused] == 30)  # max(25, 30) held during the action
    assert compute_metrics(run).downtime_min == 10.0
    # The lag the pause leaves: 10 minutes right when training resumes.
    assert run.lag_s[paused[-1]] == pytest.approx(600.0, abs=15)


def test_two_phase_trains_with_the_old_workers_while_preparing():
    policy = ScriptedPolicy({300.0: 30})
    run = run_policy(
        _workload(np.full(30, 100.0), np.ones((30, 1))),
        policy,
        Execution(shuffle=True, two_phase=True),
        initial_workers=25,
    )
    paused = np.flatnonzero(run.paused)
    start = 300 // 15
    assert np.all(run.training_workers[start : start + 28] == 25)  # 420 s of prep
    assert len(paused) * 15 == 180 and paused[0] == start + 28
    assert run.actions[0].prep_s == 420 and run.actions[0].pause_s == 180


def test_a_policy_that_never_scales_has_no_downtime():
    run = run_policy(
        _workload(np.full(30, 300.0), np.ones((30, 1))), Never(), Execution(), initial_workers=2
    )
    metrics = compute_metrics(run)
    assert metrics.downtime_min == 0 and metrics.scaling_actions == 0
    assert not run.paused.any()


def test_decisions_during_an_action_are_dropped():
    policy = ScriptedPolicy({300.0: 30, 450.0: 10})  # 450 s falls inside the first action
    run = run_policy(
        _workload(np.full(30, 100.0), np.ones((30, 1))), policy, Execution(), initial_workers=25
    )
    assert [a.to_workers for a in run.actions] == [30]
    assert any(o.pending is not None for o in policy.seen)


def test_policies_only_see_complete_past_steps():
    rates = np.arange(1.0, 31.0)
    policy = ScriptedPolicy({})
    run_policy(_workload(rates, np.ones((30, 1))), policy, Execution(), initial_workers=1)
    for obs in policy.seen:
        complete = int(obs.now_s // 60)
        np.testing.assert_array_equal(obs.arrivals_records_per_s, rates[:complete])
        assert not obs.arrivals_records_per_s.flags.writeable


def test_the_same_inputs_give_the_same_run():
    rates = np.random.default_rng(1).uniform(50, 150, 60)
    runs = [
        run_policy(
            _workload(rates, _skewed(60)),
            ScriptedPolicy({600.0: 30}),
            Execution(),
            initial_workers=20,
        )
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].lag_s, runs[1].lag_s)
    np.testing.assert_array_equal(runs[0].workers, runs[1].workers)


def test_bad_workloads():
    with pytest.raises(ConfigError):
        _workload([1.0], np.ones((1, 1)), tick_s=7)
    with pytest.raises(ConfigError):
        run_policy(_workload([1.0], np.ones((1, 1))), Never(), Execution(), initial_workers=0)
