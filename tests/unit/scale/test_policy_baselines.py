"""Adequate, HPA, Autopilot-style, Madu-style and KALE: each as its source describes it."""

import numpy as np
import pytest

from streamtrain.scale.policies import Adequate, make_policy
from streamtrain.scale.policies.autopilot import decayed_percentile
from streamtrain.scale.policies.hpa import scale_up_limit
from streamtrain.scale.policies.kale import restart_backlog_records
from streamtrain.scale.policies.madu import linear_fit
from streamtrain.scale.policy import Decision, Observation, PendingAction, PolicyContext
from streamtrain.testing import ScriptedForecaster

PER_WORKER = 100.0
OBSERVATIONS = tuple((float(w), PER_WORKER * w) for w in range(1, 21) for _ in range(2))


def _must(decision: Decision | None) -> Decision:
    assert decision is not None, "expected a decision"
    return decision


def _ctx(profile=None, **kw):
    factory = (lambda steps: ScriptedForecaster(profile)) if profile is not None else None
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


def test_restart_backlog_counts_the_pause_and_the_prep():
    loads = np.full(20, 100.0)
    # Paused 10 min at 100/s on top of 1,000 waiting.
    assert restart_backlog_records(
        loads, backlog_records=1000.0, current_records_per_s=100.0, step_s=60, prep_s=0, pause_s=600
    ) == pytest.approx(61_000.0)
    # Two-phase: 5 min of prep at 50/s of capacity, then a 5-min pause.
    assert restart_backlog_records(
        loads,
        backlog_records=1000.0,
        current_records_per_s=50.0,
        step_s=60,
        prep_s=300,
        pause_s=300,
    ) == pytest.approx(1000.0 + 50 * 300 + 100 * 300)


def test_kale_plans_for_after_its_restart():
    # Flat 300/s for the 10 minutes a restart takes, 1,000/s from then on: an action
    # now takes effect at the rise, so KALE acts now. Eq. 10 with F(w) = 100 w for
    # 1,000/s plus the restart's 300/s x 600 s spread over the hour (50/s) needs 11.
    profile = np.concatenate([np.full(20, 300.0), np.full(100, 1000.0)])
    policy = make_policy("kale", _ctx(profile))
    decision = _must(policy.decide(_obs(600, 4, np.full(10, 300.0))))
    assert decision.reason == "proactive"
    assert decision.target_workers == 11
    assert decision.plan_step_s == 600 and decision.plan == (11,) * 6


def test_kale_scales_up_far_enough_to_drain_the_backlog():
    # 720k records waiting at 8 workers for 750/s: holding drains only 50/s (690k still
    # waiting when a restart would end: +192/s over the hour, 9 is not enough), so KALE
    # scales up, and far enough to drain the waiting records plus its own pause's
    # within the hour: 750 + (720k + 450k) / 3600 = 1,075/s needs 11.
    policy = make_policy("kale", _ctx(np.full(200, 750.0)))
    decision = _must(policy.decide(_obs(600, 8, np.full(10, 750.0), backlog=720_000.0)))
    assert decision.target_workers == 11
    arrivals_only = make_policy("kale", _ctx(np.full(200, 750.0)), backlog_aware=False)
    assert arrivals_only.decide(_obs(600, 8, np.full(10, 750.0), backlog=720_000.0)) is None


def test_kale_scales_down_only_to_a_count_that_drains_its_own_restart():
    # 9 workers for 750/s: Eq. 10 on arrivals says 8, but 8 cannot also drain the
    # 450k records its 10-minute restart leaves (750 + 125 > 800): KALE holds.
    policy = make_policy("kale", _ctx(np.full(200, 750.0)))
    assert policy.decide(_obs(600, 9, np.full(10, 750.0))) is None
    # The arrivals-only reading scales down and would never drain that backlog.
    arrivals_only = make_policy("kale", _ctx(np.full(200, 750.0)), backlog_aware=False)
    assert _must(arrivals_only.decide(_obs(600, 9, np.full(10, 750.0)))).target_workers == 8
    # At 500/s, 6 workers drain 500 + 83/s: the scale-down goes ahead.
    low = make_policy("kale", _ctx(np.full(200, 500.0)))
    assert _must(low.decide(_obs(600, 9, np.full(10, 500.0)))).target_workers == 6


def test_kale_calibrates_a_short_plan_change_with_algorithm_1():
    # Plan points (10 min each) of 1,000/s with one point at 1,500/s: with the restart's
    # 600k records spread over the hour (+167/s) Eq. 10 gives 12, 12, 17, 12, 12, 12.
    # Algorithm 1 with tau = 15 min lowers the 10-minute 17 to its neighbours' 12; with
    # tau = 10 min nothing is shorter than tau and KALE rounds up to 17.
    loads = np.concatenate([np.full(40, 1000.0), np.full(10, 1500.0), np.full(100, 1000.0)])
    for tau_s, expected in ((900.0, 12), (600.0, 17)):
        policy = make_policy("kale", _ctx(loads), tau_s=tau_s)
        decision = _must(policy.decide(_obs(600, 4, np.full(10, 1000.0))))
        assert decision.target_workers == expected


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


def test_kale_does_not_scale_down_while_the_lag_is_above_the_plan():
    # The scale-down 9 -> 6 of the test above, but 5 minutes of lag no restart explains:
    # the measurements say the plan is behind, so KALE holds.
    policy = make_policy("kale", _ctx(np.full(200, 500.0)))
    lagging = _obs(600, 9, np.full(10, 500.0), lag=300.0, backlog=150_000.0)
    assert policy.decide(lagging) is None


def test_kale_fallback_ignores_the_lag_its_own_restart_explains():
    pending = PendingAction(
        from_workers=6, target_workers=9, started_at_s=0, ready_at_s=900, pause_s=900
    )

    def after_a_15_min_restart(lag_s):
        policy = make_policy("kale", _ctx(np.full(200, 300.0)))
        assert policy.decide(_obs(600, 6, np.full(10, 300.0), pending=pending)) is None
        # 10 minutes after the restart ended, at the end of the fallback's cooldown.
        return policy.decide(_obs(1500, 9, np.full(25, 300.0), lag=lag_s, backlog=300 * lag_s))

    # The plan expects 15 x (1 - 10/60) = 12.5 min of lag still: 13 min is no surprise.
    assert not _is_fallback(after_a_15_min_restart(13 * 60.0))
    # 25 min is 12.5 min more than expected: past the 10-min threshold, the fallback
    # scales up by HPA's formula on the measured lag, ceil(9 x 25 / 10) = 23 -> max 20.
    decision = _must(after_a_15_min_restart(25 * 60.0))
    assert decision.reason == "fallback" and decision.target_workers == 20


def _is_fallback(decision: Decision | None) -> bool:
    return decision is not None and decision.reason == "fallback"
