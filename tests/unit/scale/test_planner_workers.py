"""The planner's worker count comes from the workers themselves (distinct worker ids in
their samples, expired), so plain workers on the embedded broker, whose samples say
workers=0, are planned for; and the planner's heartbeat says what it plans."""

from typing import Any

from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.roster import RosterSettings
from streamtrain.scale.planner import LagReading, Planner
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.scale.policy_settings import parse_policy_settings
from streamtrain.scale.samples import SampleSettings
from streamtrain.scale.timescale import TimeScale

T0 = 1_700_000_000.0
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


def sample(worker, at_s, workers=0, rate=10.0):
    return cp.ThroughputSample(
        job="demo",
        worker_id=worker,
        workers=workers,
        records_per_s_trained=rate,
        window_s=1.0,
        observed_at_ms=int(at_s * 1000),
    )


def planner(**kwargs):
    defaults: dict[str, Any] = {
        "job": "demo",
        "group": "trainer",
        "policy": "hpa",
        "policy_settings": HPA_ON_LAG,
        "step_s": 1,
        "max_workers": 8,
        "action_pause_s": 5.0,
        "samples": SampleSettings(bucket_s=1.0),
        "workers": RosterSettings(expiry_s=30.0),
    }
    return Planner(PlannerSettings(**(defaults | kwargs)))


def test_plain_workers_are_counted_by_their_ids_and_planned_for():
    """On the embedded broker every sample says workers=0: the planner waited for a
    worker count forever."""
    p = planner()
    for at_s in (T0, T0 + 1, T0 + 2):
        for worker in ("w0", "w1"):
            assert p.add_sample(sample(worker, at_s), at_s) is None
    assert p.current_workers(T0 + 2) == 2
    p.observe_lag(LagReading(T0 + 2, 10.0, 60.0, 600))  # lag far above the target
    out = p.tick(T0 + 3)
    assert out.command is not None, out.note
    assert out.command.current_workers == 2 and out.command.target_workers > 2


def test_a_worker_that_stops_reporting_expires():
    p = planner()
    p.add_sample(sample("w0", T0), T0)
    p.add_sample(sample("w1", T0), T0)
    p.add_sample(sample("w1", T0 + 20), T0 + 20)
    assert p.current_workers(T0 + 20) == 2
    assert p.current_workers(T0 + 40) == 1  # w0 killed at T0: no goodbye, it expires


def test_a_stated_pool_size_overrides_the_count_of_ids():
    p = planner()
    p.add_sample(sample("w0", T0, workers=5), T0)
    assert p.current_workers(T0) == 5


def test_a_refused_sample_does_not_count_its_worker():
    p = planner(samples=SampleSettings(bucket_s=1.0, max_clock_skew_s=60))
    p.add_sample(sample("w0", T0), T0)
    assert p.add_sample(sample("ahead", T0 + 3_600), T0) is not None
    assert p.add_sample(sample("w1", T0, workers=4_000_000_000), T0) is not None
    assert p.current_workers(T0) == 1


def test_the_count_is_on_the_wall_clock_when_the_planner_compresses_time():
    """The demo plans on a clock 144x the wall clock: a worker heard one wall second ago
    is alive, though 144 model seconds passed."""
    p = planner(time_scale=TimeScale(144.0, T0))
    for second in range(5):
        at_s = T0 + second
        p.add_sample(sample("w0", at_s), at_s)
        p.add_sample(sample("w1", at_s), at_s)
    assert p.current_workers() == 2


def test_the_heartbeat_says_what_the_planner_plans():
    p = planner()
    waiting = p.heartbeat(T0)
    assert not waiting.HasField("planned_workers") and "worker count" not in waiting.note
    assert waiting.job == "demo" and waiting.sent_at_ms == int(T0 * 1000)
    for worker in ("w0", "w1"):
        p.add_sample(sample(worker, T0), T0)
    p.observe_lag(LagReading(T0, 10.0, 10.0, 100))  # lag at HPA's target: hold
    assert p.tick(T0 + 1).command is None
    holding = p.heartbeat(T0 + 1)
    assert (holding.planned_workers, holding.current_workers) == (2, 2)
    p.observe_lag(LagReading(T0 + 2, 10.0, 60.0, 600))
    command = p.tick(T0 + 3).command
    assert command is not None
    pending = p.heartbeat(T0 + 3)
    assert pending.planned_workers == command.target_workers
    assert pending.last_command_id == command.command_id


def test_plain_workers_get_a_decision_with_the_default_settings():
    """The same with nothing configured beyond the job (no pool-size flags anywhere)."""
    settings = PlannerSettings(
        job="demo", group="trainer", policy="hpa", policy_settings=HPA_ON_LAG
    )
    p = Planner(settings)
    for worker in ("w0", "w1"):
        p.add_sample(sample(worker, T0), T0)
    p.observe_lag(LagReading(T0, 10.0, 60.0, 600))
    out = p.tick(T0 + 1)
    assert "waiting for the worker count" not in out.note
    assert out.command is not None and out.command.current_workers == 2
