"""The shared policy interface: observations, decisions, contexts and the registry."""

from typing import Any

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.policies import POLICY_NAMES, make_policy
from streamtrain.scale.policy import Decision, Observation, PendingAction, Policy, PolicyContext


def _obs(**overrides):
    fields: dict[str, Any] = dict(
        now_s=600.0,
        current_workers=4,
        step_s=60,
        history_start_s=0.0,
        arrivals_records_per_s=np.array([1.0, 2.0, 3.0]),
        max_lag_s=0.0,
        backlog_records=0.0,
    )
    fields.update(overrides)
    return Observation(**fields)


def test_observation_helpers():
    obs = _obs()
    assert obs.observed_steps == 3
    assert obs.next_step_start_s == 180.0
    assert obs.recent_rate_records_per_s(120) == pytest.approx(2.5)


@pytest.mark.parametrize(
    "overrides",
    [
        {"current_workers": -1},
        {"step_s": 0},
        {"arrivals_records_per_s": np.ones((2, 2))},
        {"max_lag_s": -1.0},
        {"backlog_records": float("nan")},
    ],
)
def test_bad_observations(overrides):
    with pytest.raises(ConfigError):
        _obs(**overrides)


def test_decision_carries_its_path_as_the_proto_reason():
    assert Decision(target_workers=3, reason="proactive").proto_reason == cp.ScaleCommand.PROACTIVE
    assert Decision(target_workers=3, reason="fallback").proto_reason == cp.ScaleCommand.FALLBACK
    assert Decision(target_workers=3, reason="manual").proto_reason == cp.ScaleCommand.MANUAL


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target_workers": 0, "reason": "proactive"},
        {"target_workers": 2, "reason": "guess"},
        {"target_workers": 2, "reason": "proactive", "plan": (2, 3), "plan_step_s": 0},
    ],
)
def test_bad_decisions(kwargs):
    with pytest.raises(ConfigError):
        Decision(**kwargs)


def test_context_validation_and_clamp():
    ctx = PolicyContext(min_workers=2, max_workers=5)
    assert [ctx.clamp(w) for w in (0, 3, 9)] == [2, 3, 5]
    with pytest.raises(ConfigError):
        PolicyContext(min_workers=3, max_workers=2)
    with pytest.raises(ConfigError):
        PolicyContext(throughput_observations=((0, 5.0),))
    with pytest.raises(ConfigError):
        PolicyContext(action_pause_s=-1)


def test_registry_builds_every_policy():
    obs = tuple((float(w), 100.0 * w) for w in range(1, 9))
    ctx = PolicyContext(max_workers=8, throughput_observations=obs)
    for name in POLICY_NAMES:
        policy = make_policy(name, ctx)
        assert isinstance(policy, Policy)
        assert policy.name == name
        assert policy.decision_interval_s > 0


def test_registry_rejects_unknown_names_and_settings():
    with pytest.raises(ConfigError, match="unknown policy"):
        make_policy("oracle")
    with pytest.raises(ConfigError, match="bad settings"):
        make_policy("hpa", PolicyContext(), colour="blue")


def test_model_based_policies_need_observations():
    with pytest.raises(ConfigError, match="observations"):
        make_policy("kale", PolicyContext())


def test_pending_action_is_a_value():
    a = PendingAction(
        from_workers=2, target_workers=4, started_at_s=0.0, ready_at_s=600.0, pause_s=600.0
    )
    assert a == PendingAction(
        from_workers=2, target_workers=4, started_at_s=0.0, ready_at_s=600.0, pause_s=600.0
    )
