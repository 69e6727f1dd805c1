"""The live planner without a broker: arrival steps, worker count, commands, alerts."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.planner import LagReading, Planner
from streamtrain.scale.planner_settings import PlannerSettings, check_policy
from streamtrain.scale.policy_settings import parse_policy_settings
from streamtrain.scale.samples import SampleSettings
from streamtrain.scale.trigger import TriggerState

T0 = 1_700_000_000.0
# HPA on measured lag, deciding every second with no metric window: deterministic.
HPA_ON_LAG = parse_policy_settings(
    {
        "metric": "lag",
        "target": "10",
        "sync_period_s": "1",
        "readiness_delay_s": "0",
        "metric_window_s": "0",
        "scale_down_window_s": "0",
    }
)


def sample(workers, rate, at_s, worker="w0", job="demo"):
    return cp.ThroughputSample(
        job=job,
        worker_id=worker,
        workers=workers,
        records_per_s_trained=rate,
        window_s=1.0,
        observed_at_ms=int(at_s * 1000),
    )


def planner(policy="hpa", settings=HPA_ON_LAG, **kwargs):
    defaults = {
        "job": "demo",
        "group": "trainer",
        "policy": policy,
        "policy_settings": settings,
        "step_s": 1,
        "max_workers": 8,
        "action_pause_s": 5.0,
        "samples": SampleSettings(bucket_s=1.0),
    }
    return Planner(PlannerSettings(**(defaults | kwargs)))


def test_the_planner_reports_restored_steps():
    p = planner()
    assert p.restore_arrivals({100: 3.0, 101: 4.0}) == 2
    assert p.status()["restored_steps"] == 2 and p.status()["history_steps"] == 2


def test_the_worker_count_comes_from_the_newest_sample_or_applied_result():
    p = planner(initial_workers=2)
    assert p.current_workers() == 2
    p.add_sample(sample(3, 10.0, T0), T0)
    assert p.current_workers() == 3
    p.on_applied(5, T0 + 1)
    assert p.current_workers() == 5
    p.add_sample(sample(4, 10.0, T0 + 2), T0 + 2)
    assert p.current_workers() == 4


def test_a_model_based_policy_waits_for_samples():
    p = planner(policy="streamtrain", settings=(), initial_workers=1)
    p.observe_lag(LagReading(T0, 10.0, 0.0, 0))
    out = p.tick(T0 + 1)
    assert out.command is None and "throughput samples" in out.note
    assert p.status()["throughput_source"] is None


@pytest.mark.parametrize("floor_s,pause_s", [(0.0, 3.0), (10.0, 10.0)])
def test_a_decision_becomes_one_command_and_waits_for_the_pool(floor_s, pause_s):
    p = planner(min_action_pause_s=floor_s)
    for i in range(3):
        p.add_sample(sample(1, 5.0, T0 + i), T0 + i)
        p.observe_lag(LagReading(T0 + i, 20.0, 3.0, 60))
        assert p.tick(T0 + i + 0.5).command is None  # lag 3 s < target 10 s: hold
    p.observe_lag(LagReading(T0 + 3, 20.0, 30.0, 600))
    out = p.tick(T0 + 3.5)
    command = out.command
    assert command is not None
    assert (command.job, command.current_workers, command.target_workers) == ("demo", 1, 3)
    assert command.reason == cp.ScaleCommand.FALLBACK
    assert command.command_id.startswith("demo-")
    assert command.created_at_ms == int((T0 + 3.5) * 1000)
    assert "HPA" in command.explanation and "prior" in command.explanation
    assert p.status()["pending_command"] == command.command_id

    # Still one worker reporting: the action is pending, no second command.
    p.add_sample(sample(1, 5.0, T0 + 4), T0 + 4)
    p.observe_lag(LagReading(T0 + 4, 20.0, 40.0, 800))
    assert p.tick(T0 + 4.5).command is None
    # The pool reports 3 workers: settled, and the time it took is the measured pause.
    for worker in ("w0", "w1", "w2"):
        p.add_sample(sample(3, 5.0, T0 + 6, worker), T0 + 6)
    p.observe_lag(LagReading(T0 + 6, 20.0, 10.0, 200))  # at the target: hold
    p.tick(T0 + 6.5)
    status = p.status()
    assert status["pending_command"] is None
    assert status["last_pause_s"] == pytest.approx(pause_s)  # at least the floor
    assert status["commands_sent"] == 1
    assert status["current_workers"] == 3


def test_a_two_phase_scale_up_is_preparation_and_leaves_the_pause_as_measured():
    # One model: the pool counts a joiner once it healed and was admitted, the others
    # training meanwhile. The 3 s the scale-up took to show are preparation; the policy
    # keeps planning with the configured pause (what the simulator assumes too).
    p = planner(min_action_pause_s=0.5, two_phase_actions=True, action_pause_s=0.7)
    p.add_sample(sample(1, 5.0, T0), T0)
    p.observe_lag(LagReading(T0 + 3, 20.0, 30.0, 600))
    command = p.tick(T0 + 3.5).command
    assert command is not None and command.target_workers == 3
    for worker in ("w0", "w1", "w2"):
        p.add_sample(sample(3, 5.0, T0 + 6.5, worker), T0 + 6.5)
    p.observe_lag(LagReading(T0 + 6.5, 20.0, 10.0, 200))
    p.tick(T0 + 6.5)
    status = p.status()
    assert status["pending_command"] is None and status["current_workers"] == 3
    assert status["last_prep_s"] == pytest.approx(3.0)
    assert status["last_pause_s"] is None
    obs = p.observation(T0 + 7, 3)
    assert obs is not None and obs.last_pause_s is None  # the policy keeps action_pause_s
    assert obs.last_prep_s == pytest.approx(3.0)  # and plans with the measured preparation


def test_a_two_phase_scale_down_is_a_drain_and_leaves_the_pause_as_measured():
    # One model: a leaver finishes its step and hands its shards back while the others
    # train; the samples show the new count seconds later. None of it is a pause.
    p = planner(min_action_pause_s=0.5, two_phase_actions=True, action_pause_s=0.7)
    for worker in ("w0", "w1", "w2", "w3"):
        p.add_sample(sample(4, 50.0, T0, worker), T0)
    p.observe_lag(LagReading(T0 + 3, 1.0, 0.0, 0))
    command = p.tick(T0 + 3.5).command
    assert command is not None and command.target_workers < 4
    target = command.target_workers
    for k in range(target):
        p.add_sample(sample(target, 50.0, T0 + 20.0, f"w{k}"), T0 + 20.0)
    p.observe_lag(LagReading(T0 + 20.0, 1.0, 0.0, 0))
    p.tick(T0 + 20.0)
    status = p.status()
    assert status["pending_command"] is None and status["current_workers"] == target
    assert status["last_drain_s"] == pytest.approx(16.5)
    assert status["last_pause_s"] is None
    obs = p.observation(T0 + 21, target)
    assert obs is not None and obs.last_pause_s is None  # the policy keeps action_pause_s


def test_the_policy_sees_lag_and_backlog_above_the_lag_floor():
    p = planner(lag_floor_s=12.0)
    p.add_sample(sample(1, 5.0, T0), T0)
    p.observe_lag(LagReading(T0, 20.0, 30.0, 600))
    obs = p.observation(T0 + 0.5, 1)
    assert obs is not None
    assert obs.max_lag_s == pytest.approx(18.0)
    assert obs.backlog_records == pytest.approx(600 - 20.0 * 12.0)
    p.observe_lag(LagReading(T0 + 1, 20.0, 8.0, 160))  # below the floor: nothing
    obs = p.observation(T0 + 1.5, 1)
    assert obs is not None and obs.max_lag_s == 0.0 and obs.backlog_records == 0.0
    with pytest.raises(ConfigError):
        planner(lag_floor_s=-1.0)


def test_a_lag_at_the_floor_does_not_scale_up():
    floor = planner(lag_floor_s=25.0)
    plain = planner()
    for p in (floor, plain):
        p.add_sample(sample(1, 5.0, T0), T0)
        p.observe_lag(LagReading(T0, 20.0, 30.0, 600))
    assert plain.tick(T0 + 0.5).command is not None  # HPA: lag 30 s over its 10-s target
    assert floor.tick(T0 + 0.5).command is None  # 5 s above the floor: hold


def test_a_command_not_reflected_in_time_stops_being_pending():
    p = planner(command_timeout_s=10.0)
    p.add_sample(sample(1, 5.0, T0), T0)
    p.observe_lag(LagReading(T0, 20.0, 30.0, 600))
    assert p.tick(T0 + 0.5).command is not None
    p.observe_lag(LagReading(T0 + 20, 20.0, 30.0, 600))
    # The pool never changed; after the timeout the planner decides again.
    assert p.tick(T0 + 20.5).command is not None


def test_cannot_keep_up_raises_one_alert_and_resolves_it():
    p = planner(
        policy="adequate",
        settings=(),
        max_workers=2,
        samples=SampleSettings(bucket_s=1.0, prior_single_worker_records_per_s=1.0),
        initial_workers=2,
        recent_window_s=1.0,
    )
    alerts = []
    for i, rate in enumerate([100.0] * 4 + [0.5] * 3):
        p.observe_lag(LagReading(T0 + i, rate, 0.0, 0))
        alerts += p.tick(T0 + i + 0.5).alerts
    assert [(a.kind, a.severity, a.resolved) for a in alerts] == [
        (cp.Alert.CANNOT_KEEP_UP, cp.Alert.CRITICAL, False),
        (cp.Alert.CANNOT_KEEP_UP, cp.Alert.INFO, True),
    ]
    assert alerts[0].group == "trainer"
    assert "cannot keep up" in alerts[0].message


def test_the_policy_is_rebuilt_only_when_the_estimate_moves():
    p = planner(policy="kale", settings=(), refit_interval_s=1.0, initial_workers=1)
    p.add_sample(sample(1, 5.0, T0), T0)
    p.observe_lag(LagReading(T0, 5.0, 0.0, 0))
    p.tick(T0 + 1)
    first = p.policy
    assert first is not None and p.estimate.source == "prior"
    p.add_sample(sample(1, 5.1, T0 + 1), T0 + 1)  # within the 10 % tolerance
    p.tick(T0 + 2.5)
    assert p.policy is first
    for i, (workers, rate) in enumerate([(2, 8.0), (4, 13.0), (8, 20.0)]):
        at = T0 + 3 + i
        for k in range(workers):
            p.add_sample(sample(workers, rate / workers, at, f"w{k}"), at)
    first.trigger = TriggerState(active=True, cause="lag", since_s=T0 + 2.0)  # a fallback
    p.tick(T0 + 7)
    assert p.policy is not first
    assert p.policy.trigger == first.trigger  # the rebuilt policy goes on from the old one
    assert p.estimate.source == "measured"
    assert p.status()["throughput_source"] == "measured"


def test_the_streamtrain_policy_plans_on_the_prior():
    p = planner(policy="streamtrain", settings=(), initial_workers=1)
    out = None
    for i in range(121):
        p.add_sample(sample(1, 5.0, T0 + i), T0 + i)
        p.observe_lag(LagReading(T0 + i, 20.0, 1.5 * i, 15.0 * i))
        out = p.tick(T0 + i + 0.5)
        if out.command is not None:
            break
    assert out is not None and out.command is not None
    assert out.command.target_workers > 1
    assert list(out.command.plan) and out.command.plan_step_s == 1
    assert np.all(np.array(out.command.plan) <= 8)


def test_bad_settings():
    with pytest.raises(ConfigError):
        PlannerSettings(job="demo", group="g", policy="nope")
    with pytest.raises(ConfigError):
        PlannerSettings(job="", group="g")
    with pytest.raises(ConfigError):
        PlannerSettings(job="demo", group="g", min_workers=3, max_workers=2)
    with pytest.raises(ConfigError, match="bad settings"):
        check_policy(PlannerSettings(job="demo", group="g", policy_settings=(("nope", 1),)))
    check_policy(PlannerSettings(job="demo", group="g", policy="kale"))


def test_the_status_counts_samples_from_the_future_as_skewed():
    """A sample an hour ahead is refused
    and shows on /planner as ``skewed``, apart from the other rejections."""
    p = planner(samples=SampleSettings(bucket_s=1.0, max_clock_skew_s=60.0))
    assert p.add_sample(sample(2, 10.0, T0 + 3600), T0) is not None
    assert p.add_sample(sample(2, -1.0, T0), T0) is not None
    counts = p.status()["samples"]
    assert (counts["rejected"], counts["skewed"]) == (2, 1)


def test_samples_observed_while_the_pool_changes_size_do_not_measure_it():
    p = planner(initial_workers=1)
    p.add_sample(sample(1, 5.0, T0), T0)
    p.observe_lag(LagReading(T0 + 3, 20.0, 30.0, 600))
    command = p.tick(T0 + 3.5).command
    assert command is not None and command.target_workers == 3
    # the pool hands over: three workers report a third of their speed, then settle
    for worker in ("w0", "w1", "w2"):
        p.add_sample(sample(3, 1.0, T0 + 5, worker), T0 + 5)
    p.observe_lag(LagReading(T0 + 5, 20.0, 10.0, 200))
    p.tick(T0 + 5.5)
    assert p.status()["pending_command"] is None and p.current_workers() == 3
    for worker in ("w0", "w1", "w2"):  # within a bucket of the settling: still the hand-over
        p.add_sample(sample(3, 1.0, T0 + 6.2, worker), T0 + 6.2)
    for worker in ("w0", "w1", "w2"):
        p.add_sample(sample(3, 5.0, T0 + 8, worker), T0 + 8)
    p.refit(T0 + 8.5)
    assert dict(p.estimate.measured)[3] == pytest.approx(15.0)  # 3 x 5.0, no slow window
    assert p.status()["samples"]["handover"] == 6


def test_samples_around_a_disturbed_round_do_not_measure_the_pool():
    """A peer is killed at T0+10: the others wait out the collective's timeout (their
    samples show almost nothing, still labelled 4 and then 3), then one reports the
    failed round that began at T0+10. Every sample since is dropped, and so are those
    within a bucket after the report; four and three workers keep their real rates."""
    p = planner(initial_workers=4)
    workers = ("w0", "w1", "w2", "w3")
    for at_s in (T0 + 8, T0 + 9):
        for worker in workers:
            p.add_sample(sample(4, 5.0, at_s, worker), at_s)
    for at_s, pool in ((T0 + 11, 4), (T0 + 12, 3), (T0 + 13, 3)):  # waiting, not training
        for worker in workers[:3]:
            p.add_sample(sample(pool, 0.5, at_s, worker), at_s)
    p.refit(T0 + 13.5)  # a refit within the timeout sees the stall...
    assert dict(p.estimate.measured)[3] < 5.0
    report = sample(3, 0.5, T0 + 15, "w0")
    report.disturbed_s = 5.0  # the failed round began at T0+10
    assert p.add_sample(report, T0 + 15) is None
    for worker in workers[1:3]:  # within a bucket after the report: the regrouping
        p.add_sample(sample(3, 2.0, T0 + 15.5, worker), T0 + 15.5)
    for at_s in (T0 + 17, T0 + 18):
        for worker in workers[:3]:
            p.add_sample(sample(3, 5.0, at_s, worker), at_s)
    p.tick(T0 + 18.5)  # ...and the next tick refits without it
    measured = dict(p.estimate.measured)
    assert measured[4] == pytest.approx(20.0) and measured[3] == pytest.approx(15.0)
    assert p.status()["samples"]["handover"] == 3 * 3 + 1 + 2


def test_a_sample_with_a_bad_disturbance_is_refused():
    p = planner()
    for bad in (-1.0, float("nan"), float("inf")):
        report = sample(2, 5.0, T0)
        report.disturbed_s = bad
        assert "disturbed_s" in (p.add_sample(report, T0) or "")


def test_a_disturbance_longer_than_the_retention_drops_no_more_than_the_retention():
    """A worker that says its round began a year ago (a bug, a clock gone wrong) drops
    the samples of the last retention, as a real long disturbance would, and no more."""
    p = planner(samples=SampleSettings(bucket_s=1.0, retention_s=5.0))
    for at_s in (T0 + 1, T0 + 2, T0 + 3):
        for worker in ("w0", "w1"):
            p.add_sample(sample(2, 5.0, at_s, worker), at_s)
    p.add_sample(sample(2, 5.0, T0 + 5, "w1"), T0 + 5)
    report = sample(2, 5.0, T0 + 9, "w0")
    report.disturbed_s = 3.6e10
    assert p.add_sample(report, T0 + 9) is None
    # the report and the sample since T0+4; those of T0+1..3 are older than the retention
    assert p.status()["samples"]["handover"] == 1 + 1
    edge = sample(2, 5.0, T0 + 14, "w1")
    edge.disturbed_s = 2.0  # began at T0+12: a sample observed then is dropped too
    p.add_sample(sample(2, 5.0, T0 + 11.9, "w0"), T0 + 11.9)
    p.add_sample(sample(2, 5.0, T0 + 12.0, "w1"), T0 + 12.0)
    p.add_sample(edge, T0 + 14)
    assert p.status()["samples"]["handover"] == 2 + 1 + 1
