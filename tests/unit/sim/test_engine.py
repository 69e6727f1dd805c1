"""The simulator's core: conservation, lag by hand, pauses (exact seconds, drawn per
action), shuffling and its costs, determinism."""

import numpy as np
import pytest

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel
from streamtrain.sim.engine import Workload, run_policy
from streamtrain.sim.execution import ActionCosts, Execution, ShuffleCosts
from streamtrain.sim.handover import ModeCost
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


def _costs(checkpoint_s=60.0, prep_s=420.0, pause_s=120.0, spread_s=0.0, moved_only=False):
    """The checkpoint pauses both kinds of action here."""
    cost = ModeCost(prep_s, pause_s, spread_s, moved_only)
    return ActionCosts(checkpoint_s, dict.fromkeys(AssignmentMode, cost), checkpoint_s)


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
    # Forwarded records wait for their ACK before the commit: 1.32 ms, nothing more.
    assert shared.lag_s.max() == pytest.approx(ShuffleCosts().ack_latency_s)
    assert owned.lag_s.max() > 60


def test_pause_and_restart_stops_training_for_the_restart():
    costs = _costs()  # 60 s checkpoint + 420 s preparation + 120 s hand-over
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
        Execution(shuffle=True, two_phase=True, costs=_costs()),
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


def test_a_pause_is_counted_to_the_second_not_in_whole_ticks():
    # A 65-s pause from t = 300 s: four whole ticks and 5 s of the fifth, which trains for
    # its other 10 s at the target count.
    costs = _costs(checkpoint_s=60.0, pause_s=5.0)
    run = run_policy(
        _workload(np.full(30, 100.0), np.ones((30, 1))),
        ScriptedPolicy({300.0: 30}),
        Execution(shuffle=True, two_phase=True, costs=costs),
        initial_workers=25,
    )
    start = 300 // 15 + 28  # after the 420-s preparation
    np.testing.assert_allclose(run.paused_s[start : start + 5], [15, 15, 15, 15, 5])
    assert run.training_workers[start + 4] == 30
    assert compute_metrics(run).downtime_min == pytest.approx(65 / 60)
    # Worker-seconds: 30 held through the pause's end, then 30 training.
    assert run.worker_s[start + 4] == pytest.approx(30 * 15)


def test_hand_over_stalls_are_drawn_per_action_the_same_for_every_policy():
    costs = _costs(pause_s=5.0, spread_s=3.0)
    targets = {300.0: 30, 1200.0: 20, 2100.0: 28}
    runs = [
        run_policy(
            _workload(np.full(60, 100.0), np.ones((60, 1))),
            ScriptedPolicy(targets),
            Execution(two_phase=True, costs=costs, seed=seed),
            initial_workers=25,
        )
        for seed in (1, 1, 2)
    ]
    pauses = [[a.pause_s for a in r.actions] for r in runs]
    assert pauses[0] == pauses[1]  # one seed, one sequence of draws
    assert pauses[0] != pauses[2]
    for p in pauses[0] + pauses[2]:
        assert 60 + 2 <= p <= 60 + 8  # checkpoint + 5 s ± 3 s
    assert len(set(pauses[0])) == 3


def test_a_moved_only_hand_over_stalls_by_the_share_that_moves():
    costs = _costs(checkpoint_s=0.0, pause_s=20.0, moved_only=True)
    run = run_policy(
        _workload(np.full(30, 100.0), np.ones((30, 1))),
        ScriptedPolicy({300.0: 30, 900.0: 15}),
        Execution(two_phase=True, costs=costs, assignment=AssignmentMode.COOPERATIVE),
        initial_workers=20,
    )
    up, down = run.actions
    assert up.prep_s == 420 and up.pause_s == pytest.approx(20 * 10 / 30)
    assert down.prep_s == 0 and down.pause_s == pytest.approx(20 * 15 / 30)


def test_forwarding_is_counted_and_costs_capacity():
    # Two partitions, one hot (90 %): without shuffling its worker lags; with it the
    # overflow is forwarded to the idle worker, and a forwarded record costs capacity.
    shares = np.tile([[0.9, 0.1]], (30, 1))
    workload = _workload(np.full(30, 8.0), shares)  # 2 workers x 5/s = 10/s capacity
    owned = run_policy(workload, Never(), Execution(shuffle=False), initial_workers=2)
    shared = run_policy(workload, Never(), Execution(shuffle=True), initial_workers=2)
    assert owned.lag_s.max() > 60 and owned.forwarded_records.sum() == 0
    assert shared.lag_s.max() < 1  # only the ACK latency
    # 7.2/s arrive on the hot partition, 5/s train there: 2.2/s go to the other worker.
    assert shared.forwarded_records.sum() == pytest.approx(2.2 * 30 * 60, rel=1e-6)
    expensive = run_policy(
        workload,
        Never(),
        Execution(shuffle=True, shuffle_costs=ShuffleCosts(forward_cpu_s=0.2)),
        initial_workers=2,
    )
    # A forwarded record now costs 1 + 0.2 s x 5/s = 2 records of capacity: the other
    # worker's 4.2/s of spare capacity forwards 2.1/s, less than the hot 2.2/s overflow.
    assert expensive.final_backlog_records == pytest.approx(0.1 * 30 * 60)
    assert expensive.forwarded_records.sum() == pytest.approx(2.1 * 30 * 60, rel=1e-6)
