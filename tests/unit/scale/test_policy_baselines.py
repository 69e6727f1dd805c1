"""Adequate, HPA, Autopilot-style, Madu-style and KALE: each as its source describes it."""

import numpy as np
import pytest

from streamtrain.scale.policies import Adequate, make_policy
from streamtrain.scale.policies.autopilot import decayed_percentile
from streamtrain.scale.policies.hpa import scale_up_limit
from streamtrain.scale.policies.madu import linear_fit
from streamtrain.scale.policy import Decision, Observation, PendingAction, PolicyContext

PER_WORKER = 100.0
OBSERVATIONS = tuple((float(w), PER_WORKER * w) for w in range(1, 21) for _ in range(2))


class Scripted:
    """A forecaster whose prediction from n observed steps is ``profile[n:]`` (a test
    double: the policy only ever gets what ``predict`` returns)."""

    name = "scripted"
    step_s = 60

    def __init__(self, profile):
        self.profile = np.asarray(profile, dtype=float)
        self.n = 0

    def fit(self, history):
        self.n = len(history)
        return self

    def update(self, new_points):
        self.n += len(new_points)
        return self

    def predict(self, horizon):
        out = self.profile[self.n : self.n + horizon]
        return np.pad(out, (0, horizon - out.size), mode="edge")

    def save(self, path):
        raise NotImplementedError


def _must(decision: Decision | None) -> Decision:
    assert decision is not None, "expected a decision"
    return decision


def _ctx(profile=None, **kw):
    factory = (lambda steps: Scripted(profile)) if profile is not None else None
    return PolicyContext(
        max_workers=20,
        throughput_observations=OBSERVATIONS,
        model_kind="async",
        forecaster_factory=factory,
        **kw,
    )


def _obs(now_s, workers, rates, **kw):
    return Observation(
        now_s=now_s,
        current_workers=workers,
        step_s=60,
        history_start_s=0.0,
        arrivals_records_per_s=np.asarray(rates, dtype=float),
        max_lag_s=kw.pop("lag", 0.0),
        backlog_records=kw.pop("backlog", 0.0),
        **kw,
    )


# -- Adequate ------------------------------------------------------------------------------


def test_adequate_goes_to_its_fixed_count_once():
    policy = Adequate(PolicyContext(max_workers=12))
    assert policy.initial_workers == 12
    decision = _must(policy.decide(_obs(0, 5, [1.0])))
    assert decision is not None
    assert decision.target_workers == 12 and decision.reason == "manual"
    assert policy.decide(_obs(60, 12, [1.0])) is None


# -- HPA -----------------------------------------------------------------------------------


def _warm(policy, workers, utilization, start=0.0, until=300.0):
    decision = None
    t = start
    while t <= start + until:
        decision = policy.decide(_obs(t, workers, [1.0], utilization=utilization))
        t += 15.0
    return decision


def test_hpa_waits_for_a_full_metric_window_then_applies_the_formula():
    policy = make_policy("hpa", PolicyContext(max_workers=64))
    assert policy.decide(_obs(0, 4, [1.0], utilization=1.0)) is None
    decision = _warm(policy, 4, 1.0)
    # ceil(4 x 1.0 / 0.8) = 5
    assert decision is not None
    assert decision.target_workers == 5 and decision.reason == "fallback"


def test_hpa_scale_up_limit_is_double_or_four_pods():
    assert scale_up_limit(2, 100, 4) == 6
    assert scale_up_limit(10, 100, 4) == 20
    policy = make_policy("hpa", PolicyContext(max_workers=64), metric="lag", target=60.0)
    decision = None
    t = 0.0
    while decision is None and t < 1000:
        decision = policy.decide(_obs(t, 2, [1.0], lag=6000.0))
        t += 15
    assert decision is not None
    assert decision.target_workers == 6  # ceil(2 x 100) = 200, capped at 2 + 4


def test_hpa_scale_down_waits_for_the_stabilization_window():
    policy = make_policy("hpa", PolicyContext(max_workers=64), metric_window_s=0.0)
    assert _warm(policy, 10, 0.8, until=60) is None  # on target
    t = 90.0
    decisions = []
    while t < 90 + 400:
        decisions.append((t, policy.decide(_obs(t, 10, [1.0], utilization=0.4))))
        t += 15
    first = next(t for t, d in decisions if d is not None)
    assert first >= 90 + 300 - 15
    assert next(d for _, d in decisions if d is not None).target_workers == 5


def test_hpa_is_silent_during_and_right_after_an_action():
    policy = make_policy("hpa", PolicyContext(max_workers=64))
    pending = PendingAction(
        from_workers=4, target_workers=5, started_at_s=0, ready_at_s=600, pause_s=600
    )
    assert policy.decide(_obs(300, 4, [1.0], utilization=1.0, pending=pending)) is None
    # Back at 600 s: nothing until readiness delay + one full window of fresh samples.
    assert _warm(policy, 5, 1.0, start=615, until=300) is None
    assert _warm(policy, 5, 1.0, start=930, until=30).target_workers == 7


# -- Autopilot -----------------------------------------------------------------------------


def test_decayed_percentile_weights_recent_samples():
    values = np.array([100.0, 10.0])
    # The 100 is old (weight 1/1024), the 10 fresh: the median is the fresh one.
    assert decayed_percentile(values, np.array([10 * 60.0, 0.0]), 60.0, 50) == 10.0
    assert decayed_percentile(values, np.array([0.0, 0.0]), 60.0, 95) == 100.0


def test_autopilot_sizes_for_the_usage_percentile_plus_margin():
    policy = make_policy("autopilot", PolicyContext(max_workers=64))
    decision = None
    for i in range(10):
        decision = policy.decide(
            _obs(60.0 * i, 4, [1.0], utilization=1.0, throughput_per_worker_records_per_s=100.0)
        )
    # usage 400/s x 1.1 / 100 per worker = 4.4 -> 5
    assert decision is not None
    assert decision.target_workers == 5


# -- Madu ----------------------------------------------------------------------------------


def test_madu_linear_fit_and_target():
    assert linear_fit(OBSERVATIONS) == pytest.approx(PER_WORKER)
    profile = np.concatenate([np.full(10, 300.0), np.full(100, 1000.0)])
    policy = make_policy("madu", _ctx(profile), uncertainty_level=0.5)
    decision = policy.decide(_obs(600, 3, np.full(10, 300.0)))
    assert decision is not None
    assert decision.target_workers == 10 and decision.reason == "proactive"
    assert decision.plan_step_s == 60 and max(decision.plan) == 10


# -- KALE ----------------------------------------------------------------------------------


def test_kale_scales_to_the_stabilized_plan_maximum():
    # From step 10 the forecast climbs to 1,050/s within the 10-minute horizon: Eq. 10
    # with F(w) = 100 w needs 11 workers.
    profile = np.concatenate([np.full(10, 300.0), np.linspace(300, 1050, 10), np.full(50, 1050)])
    policy = make_policy("kale", _ctx(profile))
    decision = policy.decide(_obs(600, 4, np.full(10, 300.0)))
    assert decision is not None
    assert decision.reason == "proactive"
    assert decision.target_workers == 11
    assert len(decision.plan) == 10 and max(decision.plan) == 11


def test_kale_replans_only_every_ten_minutes():
    profile = np.full(200, 300.0)  # F(w) = 100 w > 300 needs 4
    policy = make_policy("kale", _ctx(profile))
    assert _must(policy.decide(_obs(600, 6, np.full(10, 300.0)))).target_workers == 4
    assert policy.decide(_obs(660, 6, np.full(11, 300.0))) is None  # no re-plan yet
    assert _must(policy.decide(_obs(1200, 6, np.full(20, 300.0)))).target_workers == 4


def test_kale_falls_back_on_lag_and_does_not_scale_down_meanwhile():
    profile = np.full(200, 300.0)  # the plan says 4 workers
    policy = make_policy("kale", _ctx(profile))
    decision = policy.decide(_obs(600, 6, np.full(10, 300.0), lag=900.0))
    # lag 15 min vs the 10-min threshold: ceil(6 x 900 / 600) = 9
    assert decision is not None
    assert decision.reason == "fallback" and decision.target_workers == 9
    pending = PendingAction(
        from_workers=6, target_workers=9, started_at_s=600, ready_at_s=1200, pause_s=600
    )
    assert policy.decide(_obs(900, 6, np.full(15, 300.0), lag=2100.0, pending=pending)) is None
    # Still lagging (20 min) at 9 workers: within the cooldown the fallback waits, and the
    # plan's 4 is not taken while the fallback is active.
    assert policy.decide(_obs(1260, 9, np.full(21, 300.0), lag=1200.0)) is None
    # After the cooldown, still lagging: the fallback acts again, ceil(9 x 1200 / 600).
    later = policy.decide(_obs(1860, 9, np.full(31, 300.0), lag=1200.0))
    assert later is not None
    assert later.reason == "fallback" and later.target_workers == 18
