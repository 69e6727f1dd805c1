"""Whether the job can keep up: one alert when it cannot, one when it can again."""

import numpy as np

from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.keep_up import KeepUpWatch, max_capacity
from streamtrain.scale.models import fit
from streamtrain.scale.policy import Observation
from streamtrain.scale.timescale import TimeScale

# Sync model fitted to a job that peaks at 4 workers (100 records/s) and slows after.
MODEL = fit("sync", [1, 2, 4, 8], [40.0, 70.0, 100.0, 90.0])


def obs(rate, now_s=1000.0):
    return Observation(
        now_s=now_s,
        current_workers=2,
        step_s=60,
        history_start_s=0.0,
        arrivals_records_per_s=np.full(10, rate),
        max_lag_s=0.0,
        backlog_records=0.0,
    )


def watch(clock=None):
    return KeepUpWatch(
        job="demo",
        group="trainer",
        min_workers=1,
        max_workers=8,
        recent_window_s=300.0,
        clock=clock or TimeScale(),
    )


def test_max_capacity_is_the_best_count_within_the_bounds():
    best, ceiling = max_capacity(MODEL, 1, 8)
    assert 1 <= best <= 8
    assert np.isclose(ceiling, MODEL.samples_per_s(np.array([float(best)]))[0])
    assert max_capacity(MODEL, 1, 2)[0] == 2  # still rising at the upper bound


def test_one_alert_when_behind_and_one_when_it_recovers():
    w = watch()
    _, ceiling = max_capacity(MODEL, 1, 8)
    assert w.check(MODEL, obs(ceiling * 0.5), "measured") is None
    alert = w.check(MODEL, obs(ceiling * 2), "measured")
    assert alert is not None and w.behind
    assert (alert.kind, alert.severity, alert.resolved) == (
        cp.Alert.CANNOT_KEEP_UP,
        cp.Alert.CRITICAL,
        False,
    )
    assert alert.group == "trainer" and "cannot keep up" in alert.message
    assert "(F from measured)" in alert.message and alert.raised_at_ms == 1_000_000
    assert w.check(MODEL, obs(ceiling * 3), "measured") is None  # still behind: no repeat
    resolved = w.check(MODEL, obs(ceiling * 0.5), "measured")
    assert resolved is not None and resolved.resolved and resolved.severity == cp.Alert.INFO
    assert (resolved.previous_state, resolved.state) == ("cannot_keep_up", "ok")
    assert not w.behind


def test_nothing_without_a_model_or_a_history():
    w = watch()
    assert w.check(None, obs(1e9), "?") is None
    empty = Observation(
        now_s=0.0,
        current_workers=1,
        step_s=60,
        history_start_s=0.0,
        arrivals_records_per_s=np.zeros(0),
        max_lag_s=0.0,
        backlog_records=0.0,
    )
    assert w.check(MODEL, empty, "?") is None and not w.behind


def test_the_alert_speaks_wall_clock_rates():
    clock = TimeScale(10.0, 0.0)  # ten model seconds per wall second
    w = watch(clock)
    _, ceiling = max_capacity(MODEL, 1, 8)
    alert = w.check(MODEL, obs(ceiling * 2, now_s=1000.0), "prior")
    assert alert is not None
    assert f"{clock.wall_rate(ceiling * 2):,.1f} records/s arrive" in alert.message
    assert alert.raised_at_ms == int(clock.wall_s(1000.0) * 1000)
